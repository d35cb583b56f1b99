-- stamp.lua: mark a SKU as verified under this Redis run after the verifier
-- checked it against the ledger. Compare-and-set on seq: if a purchase
-- slipped in since the check, nothing is written and the verifier looks again.
-- KEYS[1] sku hash
-- ARGV[1] the seq the verifier checked
-- Reply: 1 stamped; 0 seq moved or a restore is running; -1 not warmed.
local live = redis.call('HMGET', KEYS[1], 'seq', 'fence')
if not live[1] then
  return -1
end
-- A restore in progress owns the SKU until it stamps it itself.
if live[1] ~= ARGV[1] or string.sub(live[2] or '', 1, 10) == 'restoring:' then
  return 0
end
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
redis.call('HSET', KEYS[1], 'fence', run_id, 'epoch', redis.call('LASTSAVE'))
return 1
