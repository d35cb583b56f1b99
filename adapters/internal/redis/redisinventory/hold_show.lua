-- hold_show.lua: one hold's state, judged by Redis's clock and its
-- request id's receipt (hold_reply, hold.lua).
-- KEYS[1] sku hash, KEYS[2] requests hash, where the receipt is unless the
-- SKU's layout keeps it in KEYS[1] (records.lua)
-- ARGV[1] hold id
-- Reply: hold_reply with code 1; {-1} not warmed; {-9} no such hold;
-- {-20, key, message} a layout this script does not know, which would
-- send it to the wrong hash for the receipt.
local live = redis.call('HMGET', KEYS[1], 'seq', 'hold:' .. ARGV[1], 'layout')
if not live[1] then
  return {-1}
end
if not live[2] then
  return {-9}
end
if live[3] and live[3] ~= 'one-hash' then
  return {-20, KEYS[1], 'malformed sku state: layout is "' .. live[3] .. '"'}
end
local receipts_key, receipt_prefix = records_of(live[3], KEYS[1], nil, KEYS[2])
return hold_reply(1, read_hold(live[2]), now_ms(), receipts_key, receipt_prefix)
