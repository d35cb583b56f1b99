-- state.lua: a SKU's live stock, seq, limit and status in one consistent read.
-- KEYS[1] sku hash
-- Reply: {} when the SKU is not warmed, else {stock, seq, limit, status}.
local live = redis.call('HMGET', KEYS[1], 'stock', 'seq', 'limit', 'status')
if not live[1] then
  return {}
end
return {tonumber(live[1]), tonumber(live[2]), tonumber(live[3]), live[4]}
