-- fence.lua: take a SKU out of sale before a repair, so that no purchase
-- runs on stock about to be corrected. Compare-and-set on seq: the reconciler
-- fences only the state it checked.
-- KEYS[1] sku hash
-- ARGV[1] the seq the reconciler checked
-- Reply: 1 fenced; -13 seq moved or a restore is running; -1 not warmed.
local refused = guard_seq(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('HSET', KEYS[1], 'fence', 'repairing')
return 1
