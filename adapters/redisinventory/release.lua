-- release.lua: compensation for a purchase that will not complete. Returns a deduction's units to stock
-- exactly once, marks its receipt released (receipt.lua) and appends the released event (entry.lua).
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition stream
-- ARGV[1] sku id, ARGV[2] user, ARGV[3] request id of the deduction, ARGV[4] event id, ARGV[5] reason
-- Reply: {1, event_id, seq, stock} released now; {2, event_id, seq} already released
-- (the original release event); {-1} not warmed; {-4} recovering (see deduct.lua); {-6} the deduction belongs
-- to another user; {-7} no deduction with that request id.
local sku_key, buyers_key, requests_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sku, user, request_id, event_id, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

local live = redis.call('HMGET', sku_key, 'seq', 'fence', 'stock')
if not live[1] then
  return {-1}
end
if live[2] ~= node_run() then
  return {-4}
end
local raw = redis.call('HGET', requests_key, request_id)
if not raw then
  return {-7}
end
local p = read_receipt(raw)
if p.user ~= user then
  return {-6}
end
if p.released then
  return {2, p.release_event_id, p.release_seq}
end

-- All checks done; writes follow.
local stock, seq = tonumber(live[3]) + p.qty, tonumber(live[1]) + 1
redis.call('HSET', sku_key, 'stock', stock, 'seq', seq)
if redis.call('HINCRBY', buyers_key, user, -p.qty) <= 0 then
  redis.call('HDEL', buyers_key, user)
end
redis.call('HSET', requests_key, request_id,
  'R' .. seq .. ':' .. event_id .. ':' .. write_receipt(p.seq, p.remaining, p.qty, p.event_id, user))
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'released', sku, seq, p.qty, stock),
  'user', user, 'request_id', request_id, 'reason', reason)
return {1, event_id, seq, stock}
