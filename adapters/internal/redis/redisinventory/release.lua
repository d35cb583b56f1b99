-- release.lua: compensation for a purchase that will not complete. Returns a deduction's units to stock
-- exactly once, marks its receipt released (receipt.lua) and appends the released event (entry.lua).
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] partition stream; the
-- receipt and the buyer's count are where the SKU's layout keeps them (records.lua): a one-hash
-- SKU's in its own hash, so it never touches KEYS[2] and KEYS[3]
-- ARGV[1] sku id, ARGV[2] user, ARGV[3] request id of the deduction, ARGV[4] event id, ARGV[5] reason,
-- ARGV[6] the id of the hold the request id would have reserved (derived from sku and request id):
-- the release of a confirmed hold's sale carries its hold id and order id, so the ledger alone
-- tells that the hold's (and its order's) sale was undone.
-- Reply: {1, event_id, seq, stock} released now; {2, event_id, seq} already released
-- (the original release event); {-1} not warmed; {-4} recovering and {-20, key, message} a state
-- that does not read (see purchase.lua); {-6} the deduction belongs
-- to another user; {-7} no deduction with that request id; {-12} the request id reserved a hold
-- that is not confirmed: only a sale can be released.
local sku_key, buyers_key, requests_key, stream_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sku, user, request_id, event_id, reason, hold_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]

local live, refused = live_sku(sku_key)
if refused then
  return refused
end
local layout = live[8]
local receipts_key, receipt_prefix, counts_key, count_prefix = records_of(layout, sku_key, buyers_key, requests_key)
local raw = redis.call('HGET', receipts_key, receipt_prefix .. request_id)
if not raw then
  return {-7}
end
local p = read_receipt(raw)
if p.hold_id then
  return {-12}
end
if p.user ~= user then
  return {-6}
end
if p.released then
  return {2, p.release_event_id, p.release_seq}
end
-- Read before the first write: a hold record that does not parse raises.
local fields = {'user', user, 'request_id', request_id, 'reason', reason}
local raw_hold = redis.call('HGET', sku_key, 'hold:' .. hold_id)
if raw_hold then
  local h = read_hold(raw_hold)
  fields[7], fields[8], fields[9], fields[10] = 'hold_id', hold_id, 'order_id', h.order_id
end

local fault = allowance_fault(counts_key, count_prefix, {user})
if fault then
  return fault
end

-- All checks done; writes follow.
local stock, seq = tonumber(live[1]) + p.qty, tonumber(live[5]) + 1
redis.call('HSET', sku_key, 'stock', stock, 'seq', seq)
free_allowance(layout, sku_key, counts_key, count_prefix, user, p.qty)
-- The receipt was read above, so this overwrites it: the SKU's count of
-- receipts stays as it is.
redis.call('HSET', receipts_key, receipt_prefix .. request_id,
  'R' .. seq .. ':' .. event_id .. ':' .. write_receipt(p.seq, p.remaining, p.qty, p.event_id, user))
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'released', sku, seq, p.qty, stock), unpack(fields))
return {1, event_id, seq, stock}
