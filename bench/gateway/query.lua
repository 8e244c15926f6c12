-- wrk: POST /graphql for the key(s) chosen by the environment, with the gateway's API key.
--   KEY_PREFIX, KEYS: keys KEY_PREFIX1 .. KEY_PREFIX<KEYS>, walked in turn by every thread from
--   its own offset (so KEYS distinct keys are all asked within KEYS requests); FIELD: the query
--   field; API_KEY: the gateway's key.
local prefix = os.getenv("KEY_PREFIX") or "c"
local keys = tonumber(os.getenv("KEYS") or "1")
local field = os.getenv("FIELD") or "items"
local nthreads = tonumber(os.getenv("THREADS") or "2")
local threads = 0
local counter = 0

-- Each thread gets its own offset (a global of its Lua state, set from the main one).
function setup(thread)
  thread:set("offset", threads)
  threads = threads + 1
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("API_KEY") or "")

request = function()
  local key = ((counter * nthreads + (offset or 0)) % keys) + 1
  counter = counter + 1
  local body = string.format(
    '{"query":"{ %s(category: \\"%s%d\\") { id name price } }"}', field, prefix, key)
  return wrk.format(nil, "/graphql", nil, body)
end
