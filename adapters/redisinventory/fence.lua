-- fence.lua: take a SKU out of sale before a repair, so that no purchase
-- runs on stock about to be corrected. Compare-and-set on seq: the reconciler
-- fences only the state it checked.
-- KEYS[1] sku hash
-- ARGV[1] the seq the reconciler checked
-- Reply: 1 fenced; 0 seq moved or a restore is running; -1 not warmed.
local live = redis.call('HMGET', KEYS[1], 'seq', 'fence')
if not live[1] then
  return -1
end
-- A restore in progress owns the SKU until it stamps it itself.
if live[1] ~= ARGV[1] or string.sub(live[2] or '', 1, 10) == 'restoring:' then
  return 0
end
redis.call('HSET', KEYS[1], 'fence', 'repairing')
return 1
