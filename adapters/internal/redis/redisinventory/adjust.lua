-- adjust.lua: apply an approved manual stock change and append its adjusted
-- event (entry.lua). Idempotent by adjustment id: a retried approval gets
-- the original outcome and never applies twice.
-- KEYS[1] sku hash, KEYS[2] partition stream
-- ARGV[1] sku id, ARGV[2] delta, ARGV[3] event id, ARGV[4] actor (requester
-- and approver), ARGV[5] reason, ARGV[6] adjustment id
-- Reply: {1, event_id, seq, stock} applied now; {2, event_id, seq, stock}
-- applied before; {-1} not warmed; {-20, key, message} a state that does not read
-- (skustate.lua); {-4} recovering (see purchase.lua);
-- {-8, stock} the change would take stock below zero.
-- The event's qty is the delta's magnitude and its type says nothing of the
-- sign, so the packed qty of an adjusted event is the signed delta.
local sku_key, stream_key = KEYS[1], KEYS[2]
local sku, delta, event_id, actor, reason = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local marker = 'adjustment:' .. ARGV[6]

local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds', marker)
if not live[1] and not live[5] then
  return {-1}
end
if live[8] then
  local done = cjson.decode(live[8])
  return {2, done.event_id, done.seq, done.stock}
end
local fault = sku_fault(live)
if fault then
  return {-20, sku_key, 'malformed sku state: ' .. fault}
end
if not fence_holds(live[4]) then
  return {-4}
end
local stock = tonumber(live[1])
if stock + delta < 0 then
  return {-8, stock}
end

-- All checks done; writes follow.
stock = stock + delta
local seq = tonumber(live[5]) + 1
redis.call('HSET', sku_key, 'stock', stock, 'seq', seq,
  marker, cjson.encode({event_id = event_id, seq = seq, stock = stock}))
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'adjusted', sku, seq, delta, stock),
  'actor', actor, 'reason', reason)
return {1, event_id, seq, stock}
