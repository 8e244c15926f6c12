-- wrk: GET /{code} for codes drawn at random from the file named by CODES.
local codes = {}
for line in io.lines(os.getenv("CODES")) do
  if #line > 0 then codes[#codes + 1] = "/" .. line end
end
math.randomseed(os.time())
request = function()
  return wrk.format("GET", codes[math.random(#codes)])
end
