-- quarantine.lua: take a SKU whose state does not read out of sale until
-- its restore from the ledger. A buyer's count that does not parse stops
-- only that buyer, so the others would go on moving the seq the restore
-- must catch up with; the fence stops them all (fence_holds never holds
-- 'repairing', see the package doc).
-- KEYS[1] sku hash
-- Reply: 1 fenced; 2 a restore owns the SKU already: nothing written;
-- -1 the hash is missing or of another type: no script can sell the SKU,
-- nothing written.
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then
  return -1
end
local fence = redis.call('HGET', KEYS[1], 'fence')
if fence and string.sub(fence, 1, 10) == 'restoring:' then
  return 2
end
redis.call('HSET', KEYS[1], 'fence', 'repairing')
return 1
