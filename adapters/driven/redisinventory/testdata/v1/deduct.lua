-- deduct.lua: one purchase attempt, atomically: checks, deduction, buyer
-- record and the deducted event. Every check runs before the first write,
-- because Redis does not roll back a script that fails halfway.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition stream
-- ARGV[1] sku id, ARGV[2] user, ARGV[3] qty, ARGV[4] request id, ARGV[5] event id,
-- ARGV[6] the caller's Redis run_id
-- Reply codes:
--   {1, event_id, seq, remaining}  deducted now
--   {2, event_id, seq, remaining, released}  this request id already deducted: the original
--                                  receipt, and released 1 if its units were released since, else 0
--   {0, stock}                     sold out
--   {-1}                           not warmed
--   {-2}                           per-user limit reached (already purchased)
--   {-3}                           qty above the per-user limit: no user could ever buy it
--   {-4}                           recovering: the SKU is not verified since Redis restarted
--   {-5}                           sku closed
--   {-6}                           request id already used by another user or quantity
local sku_key, buyers_key, requests_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sku, user, qty, request_id, event_id, run_id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]

local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'epoch', 'hash')
if not live[1] then
  return {-1}
end
-- Fencing: the SKU was verified under one Redis run. The caller's run_id can
-- be stale for a moment after a restart (go-redis retries on a new
-- connection with the old arguments), so LASTSAVE, which Redis resets at
-- every start, guards the same thing from inside. LASTSAVE has one-second
-- resolution: only a Redis that crashed within a second of starting, seen
-- by a caller with a stale run_id, could slip through both.
if live[4] ~= run_id or tonumber(live[5]) ~= redis.call('LASTSAVE') then
  return {-4}
end

-- A retry (go-redis retries commands, callers retry on timeouts) must return
-- the original outcome, never buy a second time.
local prior = redis.call('HGET', requests_key, request_id)
if prior then
  local p = cjson.decode(prior)
  if p.user ~= user or p.qty ~= qty then
    return {-6}
  end
  local released = 0
  if p.released then
    released = 1
  end
  return {2, p.event_id, p.seq, p.remaining, released}
end

if live[3] == 'closed' then
  return {-5}
end
local limit = tonumber(live[2])
if qty > limit then
  return {-3}
end
local held = tonumber(redis.call('HGET', buyers_key, user) or '0')
if held + qty > limit then
  return {-2}
end
local stock = tonumber(live[1])
if stock < qty then
  return {0, stock}
end

-- All checks done; writes follow.
local remaining = redis.call('HINCRBY', sku_key, 'stock', -qty)
local seq = redis.call('HINCRBY', sku_key, 'seq', 1)
redis.call('HINCRBY', buyers_key, user, qty)
redis.call('HSET', requests_key, request_id, cjson.encode({
  user = user, qty = qty, event_id = event_id, seq = seq, remaining = remaining}))
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
local prev = live[6] or ''
local hash = chain_hash(prev, {event_id, 'deducted', sku, int(seq), int(qty), int(-qty), int(remaining),
  user, request_id, '', '', ts})
redis.call('HSET', sku_key, 'hash', hash)
redis.call('XADD', stream_key, '*',
  'event_id', event_id, 'type', 'deducted', 'sku', sku, 'seq', seq,
  'qty', qty, 'delta', -qty, 'balance', remaining,
  'user', user, 'request_id', request_id, 'ts', ts, 'prev_hash', prev, 'hash', hash)
return {1, event_id, seq, remaining}
