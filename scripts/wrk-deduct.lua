-- wrk-deduct.lua: wrk's requests for scripts/bench.sh's HTTP run, each a
-- new buyer. POST /v1/skus/{sku}/deduct with a user_id and a request_id
-- no other request uses: the run id, wrk's thread, a random number drawn
-- per thread and a counter. GW is the gateway token's secret, RUNID names
-- the run.
local counter, tid, prefix = 0, 0, ""

function setup(thread)
  tid = tid + 1
  thread:set("tid", tid)
end

function init(args)
  math.randomseed(os.time() + tid)
  prefix = string.format("%s-%d-%d", os.getenv("RUNID") or "x", tid, math.random(1, 1e9))
  wrk.method = "POST"
  wrk.headers["Authorization"] = "Bearer " .. os.getenv("GW")
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local id = prefix .. "-" .. counter
  return wrk.format(nil, nil, nil, '{"user_id":"u' .. id .. '","qty":1,"request_id":"r' .. id .. '"}')
end

