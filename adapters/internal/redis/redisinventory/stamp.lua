-- stamp.lua: mark a SKU as verified under this node's run (node.lua) after the verifier
-- checked it against the ledger. Compare-and-set on seq: if a purchase
-- slipped in since the check, nothing is written and the verifier looks again.
-- KEYS[1] sku hash
-- ARGV[1] the seq the verifier checked
-- Reply: 1 stamped; -13 seq moved or a restore is running; -1 not warmed.
local refused = guard_seq(KEYS[1], ARGV[1])
if refused then
  return refused
end
redis.call('HSET', KEYS[1], 'fence', node_run())
return 1
