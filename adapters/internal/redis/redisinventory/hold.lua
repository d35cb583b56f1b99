-- hold.lua: prepended to the hold scripts (see scripts.go). A hold's record
-- is field hold:<hold_id> of its SKU hash, so a hold id sent with another
-- SKU finds nothing, and retiring the SKU removes its holds with it. The
-- record is its values in a fixed order, separated by newlines, which no
-- id may hold:
--   status expires_ms seq remaining qty event_id end_seq end_event_id request_id order_id user
-- seq, remaining and event_id are the reserve's; end_seq and end_event_id
-- the event that ended the hold (0 and '' while held). Its entry in the
-- partition's expiry set is "<sku> <hold_id>", scored by expires_ms: no
-- SKU id holds a space. Fields held and holds of the SKU hash count the
-- units and the number of its open holds.
-- read_hold raises 'malformed hold record: <raw>' for a record that does
-- not parse, before any write of its caller: the Go side reads that text as
-- a corrupt record (codes.go) and has it rebuilt from the ledger.
local hold_fields = {'status', 'expires', 'seq', 'remaining', 'qty', 'event_id', 'end_seq', 'end_event_id',
  'request_id', 'order_id', 'user'}

local function read_hold(raw)
  local h, i, from = {}, 1, 1
  while true do
    local nl = string.find(raw, '\n', from, true)
    local v = string.sub(raw, from, (nl or 0) - 1)
    h[hold_fields[i]] = v
    if not nl then
      break
    end
    i, from = i + 1, nl + 1
  end
  if i == #hold_fields then
    h.expires, h.seq, h.remaining, h.qty, h.end_seq =
      tonumber(h.expires), tonumber(h.seq), tonumber(h.remaining), tonumber(h.qty), tonumber(h.end_seq)
  end
  if i ~= #hold_fields or not (h.expires and h.seq and h.remaining and h.qty and h.end_seq) then
    error('malformed hold record: ' .. raw)
  end
  return h
end

local function write_hold(h)
  return table.concat({h.status, string.format('%.0f', h.expires), h.seq, h.remaining, h.qty, h.event_id,
    h.end_seq, h.end_event_id, h.request_id, h.order_id, h.user}, '\n')
end

-- now_ms is Redis's clock in milliseconds: every deadline is set and judged
-- by it, never by a caller's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- hold_reply is a script's answer about hold h at time now: a hold past
-- its deadline is expired in effect, even before the sweeper ends it, and a
-- confirmed hold whose sale was released since is released. The record
-- keeps saying confirmed (release changes the receipt, not the hold): the
-- request id's receipt, field receipt_prefix .. request_id of receipts_key
-- (records.lua), then starts with R (receipt.lua).
local function hold_reply(code, h, now, receipts_key, receipt_prefix)
  local status = h.status
  if status == 'held' and now >= h.expires then
    status = 'expired'
  elseif status == 'confirmed' and
    string.byte(redis.call('HGET', receipts_key, receipt_prefix .. h.request_id) or '', 1) == 82 then
    status = 'released'
  end
  return {code, status, h.expires, h.seq, h.remaining, h.qty, h.event_id, h.end_seq,
    h.end_event_id, h.request_id, h.order_id, h.user, now}
end
