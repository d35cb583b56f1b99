-- state.lua: a SKU's live stock, seq, limit and status in one consistent read.
-- KEYS[1] sku hash
-- Reply: {} when the SKU is not warmed, else {stock, seq, limit, status,
-- verified, held}, verified being 1 when the SKU's fence matches this node's
-- run (node.lua), held the units of its open holds (hold.lua). A state that
-- does not read (sku_fault, skustate.lua) raises 'malformed sku state: ...',
-- which the Go side reads as a corrupt SKU state.
local live = redis.call('HMGET', KEYS[1], 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds')
if not live[1] and not live[5] then
  return {}
end
local fault = sku_fault(live)
if fault then
  error('malformed sku state: ' .. fault)
end
local verified = 0
if live[4] == node_run() then
  verified = 1
end
return {tonumber(live[1]), tonumber(live[5]), tonumber(live[2]), live[3], verified, tonumber(live[6] or '0')}
