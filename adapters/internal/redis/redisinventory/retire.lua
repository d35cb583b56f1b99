-- retire.lua: the last step of a sale's life. Removes every key of a closed
-- SKU whose buyers were archived to SQL, and adds the SKU to its partition's
-- tombstone set, so the refusal path can tell a retired SKU from an unknown
-- one. Compare-and-set on seq: the caller checked the ledger against Redis
-- at that seq, and anything that moved since (a late release) would be lost.
-- One script, so a crash leaves the SKU either fully present or fully
-- retired, never half. A one-hash SKU's records are fields of its hash
-- (records.lua), which goes with the rest: UNLINK frees it off the main
-- thread, however many receipts it holds.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] the partition's tombstone set
-- ARGV[1] sku id, ARGV[2] the seq at which the ledger was checked
-- Reply: {1} retired now; {2} retired before; {-13, seq} seq moved; {-1} not warmed;
-- {-14} not closed; {-15} buyers not archived; {-4} not verified under this node's run.
local sku_key, buyers_key, requests_key, tombstones = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local sku, seq = ARGV[1], ARGV[2]

local live = redis.call('HMGET', sku_key, 'seq', 'status', 'archived_at', 'fence', 'layout', 'buyers')
if not live[1] then
  if redis.call('SISMEMBER', tombstones, sku) == 1 then
    return {2}
  end
  return {-1}
end
-- A SKU being restored, or not verified under this node's run (node.lua),
-- may not match the ledger that was checked.
if not fence_holds(live[4]) then
  return {-4}
end
if live[2] ~= 'closed' then
  return {-14}
end
-- Only SQL may then hold a buyer's count: a one-hash SKU's u: fields are
-- all gone when its count of them is 0 (drop_buyers.lua drops them in
-- steps and sets archived_at after the last), and a count that does not
-- read proves nothing.
if not live[3] or (live[5] and tonumber(live[6]) ~= 0) or redis.call('EXISTS', buyers_key) == 1 then
  return {-15}
end
-- Holds (once they exist) are checked here: an open hold refuses, as its
-- units are neither sold nor back in stock.
if live[1] ~= seq then
  return {-13, tonumber(live[1])}
end

-- All checks done; writes follow.
redis.call('UNLINK', sku_key, buyers_key, requests_key)
redis.call('SADD', tombstones, sku)
return {1}
