-- record_probe.lua: read one receipt or hold record as the scripts that use
-- it read it (read_receipt, read_hold), with the SKU's seq at the same
-- instant, for its repair from the ledger (record_repair.lua).
-- KEYS[1] sku hash, KEYS[2] requests hash (where a SKU of the 1.0 layout keeps its receipts, records.lua)
-- ARGV[1] receipt or hold, ARGV[2] the request id (receipt) or hold id (hold)
-- Reply: {1, seq, raw} the record does not parse: raw is its value, seq the SKU's seq;
-- {2} it parses or is absent: nothing to repair; {-1} not warmed.
local live = redis.call('HMGET', KEYS[1], 'seq', 'layout')
local seq = live[1]
if not seq then
  return {-1}
end
local raw, read
if ARGV[1] == 'hold' then
  raw, read = redis.call('HGET', KEYS[1], 'hold:' .. ARGV[2]), read_hold
else
  local receipts_key, receipt_prefix = records_of(live[2], KEYS[1], nil, KEYS[2])
  raw, read = redis.call('HGET', receipts_key, receipt_prefix .. ARGV[2]), read_receipt
end
if not raw or pcall(read, raw) then
  return {2}
end
return {1, tonumber(seq), raw}
