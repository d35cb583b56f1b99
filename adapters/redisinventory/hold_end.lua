-- hold_end.lua: end a held hold, exactly once, in the state its action
-- names: confirm (the units stay sold: confirmed event, delta 0, and the
-- request id gets a purchase receipt that release can give back), cancel or
-- expire (the units and the buyer's allowance come back: cancelled or
-- expired event, delta +qty). Confirm, cancel, the sweepers and retries may
-- race; the first to run ends the hold, and the others see how it ended.
-- A hold past its deadline can only expire. A closed SKU still ends its holds.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition expiry set,
-- KEYS[5] partition stream
-- ARGV[1] sku id, ARGV[2] hold id, ARGV[3] confirm|cancel|expire, ARGV[4] event id
-- Reply: hold_reply (hold.lua) with code 1 ended now; 2 it had already ended as asked (a
-- repeat); -10 it ended otherwise, or is past its deadline (status says which); -11 (expire
-- only) not yet due; or {-1} not warmed, {-4} recovering, {-9} no such hold. An expire that
-- finds no such SKU or hold drops the expiry entry, its only write.
local sku_key, buyers_key, requests_key, expiry_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sku, hold_id, action, event_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local member = sku .. ' ' .. hold_id
local ends = {confirm = 'confirmed', cancel = 'cancelled', expire = 'expired'}
local want = ends[action]
if not want then
  return redis.error_reply('hold_end.lua: unknown action ' .. tostring(action))
end

local live, refused = live_sku(sku_key)
if refused and refused[1] == -4 then
  return refused
end
local rec = live and redis.call('HMGET', sku_key, 'hold:' .. hold_id, 'held', 'holds') or {}
local raw = rec[1]
if not raw then
  if action == 'expire' then
    redis.call('ZREM', expiry_key, member)
  end
  return refused or {-9}
end
local h = read_hold(raw)
local now = now_ms()
if h.status ~= 'held' then
  if h.status == want then
    return hold_reply(2, h, now)
  end
  return hold_reply(-10, h, now)
end
if action == 'expire' then
  if now < h.expires then
    return hold_reply(-11, h, now)
  end
elseif now >= h.expires then
  return hold_reply(-10, h, now)
end

-- All checks done; writes follow.
local stock, seq = tonumber(live[1]), tonumber(live[5]) + 1
h.status, h.end_seq, h.end_event_id = want, seq, event_id
if action == 'confirm' then
  redis.call('HSET', requests_key, h.request_id, write_receipt(h.seq, h.remaining, h.qty, h.event_id, h.user))
else
  stock = stock + h.qty
  free_allowance(buyers_key, h.user, h.qty)
end
redis.call('HSET', sku_key, 'stock', stock, 'seq', seq, 'hold:' .. hold_id, write_hold(h),
  'held', tonumber(rec[2]) - h.qty, 'holds', tonumber(rec[3]) - 1)
redis.call('ZREM', expiry_key, member)
redis.call('XADD', stream_key, '*', 'e', entry(event_id, want, sku, seq, h.qty, stock),
  'user', h.user, 'request_id', h.request_id, 'hold_id', hold_id, 'order_id', h.order_id)
return hold_reply(1, h, now)
