-- deduct.lua: one purchase attempt, atomically: checks (purchase.lua),
-- deduction, buyer record, receipt and the deducted event. Every check runs before the first
-- write, because Redis does not roll back a script that fails halfway.
-- Each purchase writes as little as the projector and a retry need: one HSET
-- of stock and seq, the buyer, a compact receipt (receipt.lua) and a
-- stream entry (entry.lua). The entry's time is its stream id, which Redis
-- stamps from its clock; its delta follows from type and qty; the
-- tamper-evident chain is sealed in the ledger, not here.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition stream
-- ARGV[1] sku id, ARGV[2] user, ARGV[3] qty, ARGV[4] request id, ARGV[5] event id,
-- ARGV[6] (only for a sampled, traced request) its W3C traceparent, written to the
-- entry as field tp
-- Reply codes:
--   {1, event_id, seq, remaining}  deducted now
--   {2, event_id, seq, remaining, released}  this request id already deducted: the original
--                                  receipt, and released 1 if its units were released since, else 0
--   {0, stock}                     sold out
--   {-1}                           not warmed
--   {-2}                           per-user limit reached (already purchased)
--   {-3}                           qty above the per-user limit: no user could ever buy it
--   {-4}                           recovering: the SKU is not verified under this node's run (node.lua)
--   {-5}                           sku closed
--   {-6}                           request id already used by another user or quantity
local sku_key, buyers_key, requests_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sku, user, qty, request_id, event_id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]

local live, refused = live_sku(sku_key)
if refused then
  return refused
end

-- A retry (go-redis retries commands, callers retry on timeouts) must return
-- the original outcome, never buy a second time.
local prior = redis.call('HGET', requests_key, request_id)
if prior then
  local p = read_receipt(prior)
  -- A hold's request id (p.hold_id) is never a deduction's.
  if p.user ~= user or p.qty ~= qty then
    return {-6}
  end
  local released = 0
  if p.released then
    released = 1
  end
  return {2, p.event_id, p.seq, p.remaining, released}
end

local held, stock
held, stock, refused = allowance(live, buyers_key, user, qty)
if refused then
  return refused
end

-- All checks done; writes follow.
local remaining, seq = stock - qty, tonumber(live[5]) + 1
redis.call('HSET', sku_key, 'stock', remaining, 'seq', seq)
redis.call('HSET', buyers_key, user, held + qty)
redis.call('HSET', requests_key, request_id, write_receipt(seq, remaining, qty, event_id, user))
local fields = {'XADD', stream_key, '*', 'e', entry(event_id, 'deducted', sku, seq, qty, remaining),
  'user', user, 'request_id', request_id}
if ARGV[6] then
  fields[#fields + 1], fields[#fields + 2] = 'tp', ARGV[6]
end
redis.call(unpack(fields))
return {1, event_id, seq, remaining}
