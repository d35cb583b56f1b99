-- restore_begin.lua: fence a SKU before its state is rebuilt from the ledger.
-- batch.lua and release.lua compare the fence with the node's run
-- (node.lua), and a restore token never equals one, so both answer "recovering" until
-- restore_finish.lua stamps the SKU: nobody sees a half-written state.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash
-- ARGV[1] restore token, ARGV[2] the ledger's seq, ARGV[3] the ledger's stock,
-- ARGV[4] per-user limit
-- Reply: {1} fenced, buyers and requests emptied for rewriting;
-- {-16, seq} Redis holds the SKU at a higher seq than the ledger: its newer
-- events are not projected yet, and nothing is written.
-- A SKU whose state does not read (a hash key of another type, or a seq
-- that does not parse) has no seq to compare: the caller made sure that
-- the ledger holds every event its stream did (the reconciler's repair of
-- a corrupt SKU state waits until none is in flight).
local wrong_type = redis.call('TYPE', KEYS[1]).ok ~= 'hash'
local seq = not wrong_type and tonumber(redis.call('HGET', KEYS[1], 'seq'))
if seq and seq > tonumber(ARGV[2]) then
  return {-16, seq}
end

-- All checks done; writes follow.
if wrong_type then
  redis.call('UNLINK', KEYS[1])
end
if seq then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1])
  -- Open-hold counts that do not parse go: the restore writes them again
  -- when the ledger has open holds, and none reads as zero.
  local counts = redis.call('HMGET', KEYS[1], 'held', 'holds')
  if (counts[1] and not tonumber(counts[1])) or (counts[2] and not tonumber(counts[2])) then
    redis.call('HDEL', KEYS[1], 'held', 'holds')
  end
else
  -- A missing SKU is created whole, so that warm.lua finds it live and can
  -- never stock it a second time while the restore runs.
  redis.call('HSET', KEYS[1], 'stock', ARGV[3], 'seq', ARGV[2], 'limit', ARGV[4],
    'status', 'open', 'fence', ARGV[1])
end
redis.call('UNLINK', KEYS[2], KEYS[3])
return {1}
