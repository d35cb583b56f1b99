-- hold_end.lua: end held holds of one SKU, each exactly once, in the state
-- the action names: confirm (the units stay sold: confirmed event, delta 0,
-- and the request id gets a purchase receipt that release can give back),
-- cancel or expire (the units and the buyer's allowance come back: cancelled
-- or expired event, delta +qty). Confirm, cancel, the sweepers and retries
-- may race; the first to run ends a hold, and the others see how it ended.
-- A hold past its deadline can only expire. A closed SKU still ends its
-- holds. The API ends one hold per call; a sweeper ends a SKU's due holds in
-- one call, which reads the SKU, the clock and the records once and writes
-- the SKU hash and the expiry set once, instead of once per hold.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition expiry set,
-- KEYS[5] partition stream; the receipts and buyers' counts are where the SKU's layout keeps
-- them (records.lua): a one-hash SKU's in its own hash, so it never touches KEYS[2] and KEYS[3]
-- ARGV[1] sku id, ARGV[2] confirm|cancel|expire,
-- ARGV[3], ARGV[4], ...: for each hold, its id and the id of the event that would end it
-- Reply: one answer per hold, in ARGV's order: hold_reply (hold.lua) with code 1 ended now;
-- 2 it had already ended as asked (a repeat); -10 it ended otherwise (or was confirmed and its
-- sale released since), or is past its deadline (status says which); -11 (expire only) not yet
-- due; or {-1} not warmed, {-4} recovering, {-20, key, message} a state that does not read
-- (purchase.lua), {-9} no such hold. An expire that finds no such SKU
-- or hold, or a hold that has already ended, drops the expiry entry.
local sku_key, buyers_key, requests_key, expiry_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local sku, action = ARGV[1], ARGV[2]
local ends = {confirm = 'confirmed', cancel = 'cancelled', expire = 'expired'}
local want = ends[action]
if not want then
  return redis.error_reply('hold_end.lua: unknown action ' .. tostring(action))
end
local n = (#ARGV - 2) / 2
if n < 1 or n ~= math.floor(n) then
  return redis.error_reply('hold_end.lua: want pairs of hold id and event id after ARGV[2]')
end

local replies = {}
local live, refused = live_sku(sku_key)
if refused and refused[1] ~= -1 then
  for i = 1, n do
    replies[i] = refused
  end
  return replies
end
-- A hold named twice would be ended twice by the writes below.
local fields, named = {'held', 'holds'}, {}
for i = 1, n do
  local hold_id = ARGV[1 + 2 * i]
  if named[hold_id] then
    return redis.error_reply('hold_end.lua: hold ' .. hold_id .. ' named twice')
  end
  named[hold_id] = true
  fields[2 + i] = 'hold:' .. hold_id
end
local rec = live and redis.call('HMGET', sku_key, unpack(fields)) or {}
local layout = live and live[8]
local receipts_key, receipt_prefix, counts_key, count_prefix = records_of(layout, sku_key, buyers_key, requests_key)
local now = now_ms()
local ending, dropped = {}, {}
for i = 1, n do
  local hold_id, raw = ARGV[1 + 2 * i], rec[2 + i]
  if not raw then
    if action == 'expire' then
      dropped[#dropped + 1] = sku .. ' ' .. hold_id
    end
    replies[i] = refused or {-9}
  else
    local h = read_hold(raw)
    if h.status ~= 'held' then
      -- An entry left behind for an ended hold (a hand edit, a partial
      -- restore) would come up as due at every pass, ahead of the live ones.
      if action == 'expire' then
        dropped[#dropped + 1] = sku .. ' ' .. hold_id
      end
      -- A confirmed hold whose sale was released is neither a repeat of
      -- the confirm nor cancellable: hold_reply says released.
      local shown = hold_reply(-10, h, now, receipts_key, receipt_prefix)
      if shown[2] == want then
        shown[1] = 2
      end
      replies[i] = shown
    elseif action == 'expire' and now < h.expires then
      replies[i] = hold_reply(-11, h, now, receipts_key, receipt_prefix)
    elseif action ~= 'expire' and now >= h.expires then
      replies[i] = hold_reply(-10, h, now, receipts_key, receipt_prefix)
    else
      ending[#ending + 1] = {i, hold_id, ARGV[2 + 2 * i], h}
    end
  end
end

if action ~= 'confirm' and #ending > 0 then
  local users = {}
  for k, e in ipairs(ending) do
    users[k] = e[4].user
  end
  local fault = allowance_fault(counts_key, count_prefix, users)
  if fault then
    for i = 1, n do
      replies[i] = fault
    end
    return replies
  end
end

-- All checks done; writes follow.
if #ending == 0 then
  if #dropped > 0 then
    redis.call('ZREM', expiry_key, unpack(dropped))
  end
  return replies
end
local stock, seq, held, holds = tonumber(live[1]), tonumber(live[5]), tonumber(rec[1]), tonumber(rec[2])
local records = {}
for _, e in ipairs(ending) do
  local i, hold_id, event_id, h = e[1], e[2], e[3], e[4]
  seq = seq + 1
  h.status, h.end_seq, h.end_event_id = want, seq, event_id
  if action == 'confirm' then
    -- The receipt replaces the reserve's H<hold_id>, so a one-hash SKU's
    -- count of receipts moves only where that was missing.
    local added = redis.call('HSET', receipts_key, receipt_prefix .. h.request_id,
      write_receipt(h.seq, h.remaining, h.qty, h.event_id, h.user))
    if added > 0 then
      count_records(layout, sku_key, 'receipts', added)
    end
  else
    stock = stock + h.qty
    free_allowance(layout, sku_key, counts_key, count_prefix, h.user, h.qty)
  end
  held, holds = held - h.qty, holds - 1
  records[#records + 1] = 'hold:' .. hold_id
  records[#records + 1] = write_hold(h)
  dropped[#dropped + 1] = sku .. ' ' .. hold_id
  redis.call('XADD', stream_key, '*', 'e', entry(event_id, want, sku, seq, h.qty, stock),
    'user', h.user, 'request_id', h.request_id, 'hold_id', hold_id, 'order_id', h.order_id)
  replies[i] = hold_reply(1, h, now, receipts_key, receipt_prefix)
end
redis.call('HSET', sku_key, 'stock', stock, 'seq', seq, 'held', held, 'holds', holds, unpack(records))
redis.call('ZREM', expiry_key, unpack(dropped))
return replies
