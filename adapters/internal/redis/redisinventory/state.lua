-- state.lua: a SKU's live stock, seq, limit and status in one consistent read.
-- KEYS[1] sku hash
-- Reply: {} when the SKU is not warmed, else {stock, seq, limit, status,
-- verified, held}, verified being 1 when the SKU's fence matches this node's
-- run (node.lua), held the units of its open holds (hold.lua).
local live = redis.call('HMGET', KEYS[1], 'stock', 'seq', 'limit', 'status', 'fence', 'held')
if not live[1] then
  return {}
end
local verified = 0
if live[5] == node_run() then
  verified = 1
end
return {tonumber(live[1]), tonumber(live[2]), tonumber(live[3]), live[4], verified, tonumber(live[6] or '0')}
