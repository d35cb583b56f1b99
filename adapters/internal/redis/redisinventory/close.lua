-- close.lua: end a SKU's sale and append its closed event (entry.lua):
-- delta 0, with who closed it, so the ledger, and every reader of it, sees
-- the end of the sale in seq order. batch.lua refuses new purchases of a
-- closed SKU, after replaying the receipts of earlier requests; release.lua
-- still returns units. Closing twice keeps the first closing time and
-- appends nothing.
-- KEYS[1] sku hash, KEYS[2] partition stream
-- ARGV[1] sku id, ARGV[2] event id, ARGV[3] actor
-- Reply: {1, closed_at, seq} closed now; {2, closed_at} closed before; {-1} not warmed;
-- {-20, key, message} a state that does not read (skustate.lua); {-4} recovering (see node.lua).
-- closed_at is Redis TIME in microseconds, like the events' ts.
local sku_key, stream_key = KEYS[1], KEYS[2]
local sku, event_id, actor = ARGV[1], ARGV[2], ARGV[3]
local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds', 'closed_at')
if not live[1] and not live[5] then
  return {-1}
end
if live[3] == 'closed' and live[8] then
  return {2, live[8]}
end
local fault = sku_fault(live)
if fault then
  return {-20, sku_key, 'malformed sku state: ' .. fault}
end
if not fence_holds(live[4]) then
  return {-4}
end

-- All checks done; writes follow.
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
local seq = tonumber(live[5]) + 1
redis.call('HSET', sku_key, 'status', 'closed', 'closed_at', ts, 'seq', seq)
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'closed', sku, seq, 0, live[1]), 'actor', actor)
return {1, ts, seq}
