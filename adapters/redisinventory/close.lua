-- close.lua: end a SKU's sale. deduct.lua refuses new purchases of a closed
-- SKU, after replaying the receipts of earlier requests; release.lua still
-- returns units. Closing twice keeps the first closing time.
-- KEYS[1] sku hash
-- Reply: {1, closed_at} closed now; {2, closed_at} closed before; {-1} not warmed.
-- closed_at is Redis TIME in microseconds, like the events' ts.
local live = redis.call('HMGET', KEYS[1], 'stock', 'status', 'closed_at')
if not live[1] then
  return {-1}
end
if live[2] == 'closed' and live[3] then
  return {2, live[3]}
end

-- All checks done; writes follow.
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('HSET', KEYS[1], 'status', 'closed', 'closed_at', ts)
return {1, ts}
