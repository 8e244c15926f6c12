-- wrk: GET /{code} for codes drawn at random from the file named by CODES.
local codes = {}
for line in io.lines(os.getenv("CODES")) do
  if #line > 0 then codes[#codes + 1] = "/" .. line end
end
math.randomseed(os.time())
request = function()
  return wrk.format("GET", codes[math.random(#codes)])
end
-- A phone's browser, as most visitors are (the server reads the User-Agent on every visit).
wrk.headers["User-Agent"] = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1"
