-- correct.lua: set a SKU's stock to the ledger's truth and stamp it as
-- verified under this node's run (node.lua). Compare-and-set on seq, so a live sale is
-- never disturbed: if a purchase moved the seq since the reconciler read it,
-- nothing is written and the next pass looks again.
-- KEYS[1] sku hash
-- ARGV[1] the seq the reconciler checked, ARGV[2] the correct stock
-- Reply: 1 corrected; -13 seq moved or a restore is running; -1 not warmed.
local refused = guard_seq(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('HSET', KEYS[1], 'stock', ARGV[2], 'fence', node_run())
return 1
