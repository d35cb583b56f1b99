-- entomb.lua: put a retired SKU back into its partition's tombstone set
-- after Redis lost it, unless Redis holds the SKU itself: then it is live
-- and stays so.
-- KEYS[1] sku hash, KEYS[2] the partition's tombstone set
-- ARGV[1] sku id
-- Reply: 1 tombstoned; -19 the SKU is in Redis: nothing written.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -19
end

-- All checks done; writes follow.
redis.call('SADD', KEYS[2], ARGV[1])
return 1
