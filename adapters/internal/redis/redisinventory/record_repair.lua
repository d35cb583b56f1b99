-- record_repair.lua: replace one corrupt receipt or hold record with what
-- the ledger holds for it. A record that does not parse makes every script
-- that reads it fail before its first write, so nothing changed its truth
-- since record_probe.lua read it; the one check that matters is that it
-- still holds the value the probe read (nobody repaired or restored it
-- since). The SKU must be verified under this node's run (node.lua): a
-- restore in progress, or a Redis that restarted, rewrites or verifies the
-- whole SKU instead.
-- KEYS[1] sku hash, KEYS[2] requests hash (where a SKU of the 1.0 layout keeps its receipts, records.lua)
-- ARGV[1] receipt or hold, ARGV[2] the request id (receipt) or hold id (hold),
-- ARGV[3] the corrupt value the probe read, ARGV[4] the record the ledger gives,
-- '' when the ledger has none: the field is deleted
-- Reply: {1} rewritten; {-1} not warmed; {-4} recovering: not verified under
-- this node's run; {-13} the field no longer holds the value read: nothing written.
local live = redis.call('HMGET', KEYS[1], 'seq', 'fence', 'layout')
if not live[1] then
  return {-1}
end
if not fence_holds(live[2]) then
  return {-4}
end
local key, prefix = records_of(live[3], KEYS[1], nil, KEYS[2])
local field = prefix .. ARGV[2]
if ARGV[1] == 'hold' then
  key, field = KEYS[1], 'hold:' .. ARGV[2]
end
if redis.call('HGET', key, field) ~= ARGV[3] then
  return {-13}
end

-- All checks done; the one write follows.
if ARGV[4] == '' then
  redis.call('HDEL', key, field)
  if ARGV[1] ~= 'hold' then
    count_records(live[3], KEYS[1], 'receipts', -1)
  end
else
  redis.call('HSET', key, field, ARGV[4])
end
return {1}
