-- reserve.lua: take units out of available stock for a hold that ends by
-- confirm, cancel or its deadline, atomically: the checks deduct runs
-- (purchase.lua) in the same order, then the hold record (hold.lua), the
-- request id's marker, the expiry set entry and the reserved event.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition expiry set,
-- KEYS[5] partition stream
-- ARGV[1] sku id, ARGV[2] user, ARGV[3] qty, ARGV[4] request id, ARGV[5] event id,
-- ARGV[6] ttl in ms, ARGV[7] hold id (derived from sku and request id), ARGV[8] order id or ''
-- Reply: hold_reply (hold.lua) with code 1 reserved now, 2 this request id already reserved
-- this hold (its state now); or deduct.lua's refusals {0, stock}, {-1}..{-6}.
local sku_key, buyers_key, requests_key, expiry_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sku, user, qty, request_id, event_id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local ttl_ms, hold_id, order_id = tonumber(ARGV[6]), ARGV[7], ARGV[8]

local live, refused = live_sku(sku_key)
if refused then
  return refused
end

-- A retry returns the original hold, in the state it is in now.
if redis.call('HEXISTS', requests_key, request_id) == 1 then
  local raw = redis.call('HGET', sku_key, 'hold:' .. hold_id)
  if not raw then
    return {-6}
  end
  local h = read_hold(raw)
  if h.user ~= user or h.qty ~= qty or h.order_id ~= order_id then
    return {-6}
  end
  return hold_reply(2, h, now_ms(), requests_key)
end

local counted, stock
counted, stock, refused = allowance(live, buyers_key, user, qty)
if refused then
  return refused
end

-- All checks done; writes follow. The SKU hash counts its open holds and
-- their units, which reconciliation compares with the ledger.
local open = redis.call('HMGET', sku_key, 'held', 'holds')
local now = now_ms()
local h = {status = 'held', expires = now + ttl_ms, seq = tonumber(live[5]) + 1, remaining = stock - qty, qty = qty,
  event_id = event_id, end_seq = 0, end_event_id = '', request_id = request_id, order_id = order_id, user = user}
redis.call('HSET', sku_key, 'stock', h.remaining, 'seq', h.seq, 'hold:' .. hold_id, write_hold(h),
  'held', (tonumber(open[1]) or 0) + qty, 'holds', (tonumber(open[2]) or 0) + 1)
redis.call('HSET', buyers_key, user, counted + qty)
redis.call('HSET', requests_key, request_id, 'H' .. hold_id)
redis.call('ZADD', expiry_key, h.expires, sku .. ' ' .. hold_id)
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'reserved', sku, h.seq, qty, h.remaining),
  'user', user, 'request_id', request_id, 'hold_id', hold_id, 'expires_at', string.format('%.0f', h.expires),
  'order_id', order_id)
return hold_reply(1, h, now, requests_key)
