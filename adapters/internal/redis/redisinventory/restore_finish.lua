-- restore_finish.lua: complete a restore: set the SKU's figures from the
-- ledger and stamp it as verified under this node's run (node.lua, as
-- warm.lua and stamp.lua do), which reopens it to purchases. The SKU's
-- records are where restore_begin.lua set its layout (records.lua).
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash, KEYS[4] the
-- partition's tombstone set, which a SKU brought back from retirement leaves,
-- KEYS[5] the partition's expiry set (hold.lua)
-- ARGV[1] restore token, ARGV[2] stock, ARGV[3] seq, ARGV[4] per-user limit,
-- ARGV[5] stocked event id, ARGV[6] closed_at ('' while open),
-- ARGV[7] archived_at ('' unless the buyers were archived to SQL),
-- ARGV[8] buyers written, ARGV[9] requests written, ARGV[10] sku id,
-- ARGV[11..] deadline, "<sku> <hold_id>" of each open hold, for the expiry set.
-- Reply: {1} stamped; {-17} the fence no longer holds the token (another
-- restore or a stamp took over): nothing written; {-18, buyers, requests}
-- Redis does not hold the buyers' counts and receipts that were written (a
-- count of -1: a one-hash SKU's count that does not read, or its
-- buyers or requests hash exists): nothing written, the SKU stays fenced
-- until a restore completes.
local live = redis.call('HMGET', KEYS[1], 'fence', 'status', 'closed_at', 'layout', 'receipts', 'buyers')
if live[1] ~= ARGV[1] then
  return {-17}
end
-- The fence holds this restore's token, so the layout is the one
-- restore_begin.lua wrote. A one-hash SKU's records share its hash with
-- everything else, where restore_chunk.lua counted each new one: its
-- counts are the exact check HLEN is for the 1.0 layout's own hashes,
-- which must then be gone.
local buyers, requests
if live[4] == 'one-hash' then
  buyers, requests = tonumber(live[6]) or -1, tonumber(live[5]) or -1
  if redis.call('EXISTS', KEYS[2], KEYS[3]) ~= 0 then
    buyers, requests = -1, -1
  end
else
  buyers, requests = redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3])
end
if buyers ~= tonumber(ARGV[8]) or requests ~= tonumber(ARGV[9]) then
  return {-18, buyers, requests}
end
-- A close that ran during the restore wins over the ledger's open state:
-- closing only ever refuses sales, and SQL records it right after.
local status, closed_at = 'open', false
if ARGV[6] ~= '' then
  status, closed_at = 'closed', ARGV[6]
elseif live[2] == 'closed' then
  status, closed_at = 'closed', live[3]
end

-- All checks done; writes follow.
redis.call('HSET', KEYS[1], 'stock', ARGV[2], 'seq', ARGV[3], 'limit', ARGV[4], 'status', status,
  'stocked_event_id', ARGV[5], 'fence', node_run())
if closed_at then
  redis.call('HSET', KEYS[1], 'closed_at', closed_at)
else
  redis.call('HDEL', KEYS[1], 'closed_at')
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'archived_at', ARGV[7])
else
  redis.call('HDEL', KEYS[1], 'archived_at')
end
redis.call('SREM', KEYS[4], ARGV[10])
for i = 11, #ARGV, 2 do
  redis.call('ZADD', KEYS[5], ARGV[i], ARGV[i + 1])
end
return {1}
