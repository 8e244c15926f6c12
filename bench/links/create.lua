-- wrk: POST / creating a new link per request (a distinct URL each time), with the API key.
local counter = 0
local id = tostring(math.random(1, 1e9))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("API_KEY")
setup = function(thread)
  thread:set("id", tostring(math.random(1, 1e9)))
end
request = function()
  counter = counter + 1
  local body = '{"url":"https://game.example.com/bench/' .. id .. '-' .. counter .. '"}'
  return wrk.format(nil, nil, nil, body)
end
