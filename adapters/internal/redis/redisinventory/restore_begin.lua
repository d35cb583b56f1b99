-- restore_begin.lua: fence a SKU before its state is rebuilt from the ledger.
-- batch.lua and release.lua compare the fence with the node's run
-- (node.lua), and a restore token never equals one, so both answer "recovering" until
-- restore_finish.lua stamps the SKU: nobody sees a half-written state.
-- The restore writes the SKU in the layout it is given (records.lua),
-- whatever layout it had: it starts here from a SKU that holds no record.
-- KEYS[1] sku hash, KEYS[2] buyers hash, KEYS[3] requests hash
-- ARGV[1] restore token, ARGV[2] the ledger's seq, ARGV[3] the ledger's stock,
-- ARGV[4] per-user limit, ARGV[5] the layout to write: one-hash, or '' for the 1.0 layout
-- Reply: {1} fenced, every record gone for rewriting (a one-hash SKU's
-- counts of them at 0); {-16, seq} Redis holds the SKU at a higher seq than the ledger: its newer
-- events are not projected yet, and nothing is written.
-- A SKU whose state does not read (a hash key of another type, or a seq
-- that does not parse) has no seq to compare: the caller made sure that
-- the ledger holds every event its stream did (the reconciler's repair of
-- a corrupt SKU state waits until none is in flight).
local sku_key, buyers_key, requests_key = KEYS[1], KEYS[2], KEYS[3]
local token, layout = ARGV[1], ARGV[5]
if layout ~= 'one-hash' and layout ~= '' then
  return redis.error_reply('restore_begin.lua: layout ' .. tostring(layout) .. ', want one-hash or empty')
end
local wrong_type = redis.call('TYPE', sku_key).ok ~= 'hash'
local live = not wrong_type and redis.call('HMGET', sku_key, 'seq', 'stock', 'limit', 'status', 'stocked_event_id',
  'closed_at', 'archived_at', 'held', 'holds', 'layout', 'receipts', 'buyers')
local seq = live and tonumber(live[1])
if seq and seq > tonumber(ARGV[2]) then
  return {-16, seq}
end
-- A hash with any of the one-hash fields may hold r: and u: records,
-- millions of them, which no script may delete one by one: the hash goes
-- whole (UNLINK frees it off the main thread) and comes back with the
-- fields the restore does not rewrite. A hash of the 1.0 layout holds no
-- record and is kept, as it always was.
local recreate = wrong_type or live[10] or live[11] or live[12]

-- All checks done; writes follow.
if recreate then
  redis.call('UNLINK', sku_key)
end
if seq and recreate then
  -- What restore_finish.lua does not set from the ledger, or reads to let
  -- a close that ran during the restore win (status, closed_at), is
  -- carried over; hold records and their counts are not, as the restore
  -- writes every hold the ledger has. The SKU stays live (stock), so that
  -- warm.lua can never stock it a second time while the restore runs.
  local set = {'HSET', sku_key, 'seq', live[1], 'stock', live[2] or ARGV[3], 'limit', live[3] or ARGV[4],
    'status', live[4] or 'open', 'fence', token}
  for i, name in ipairs({'stocked_event_id', 'closed_at', 'archived_at'}) do
    if live[4 + i] then
      set[#set + 1], set[#set + 2] = name, live[4 + i]
    end
  end
  redis.call(unpack(set))
elseif seq then
  redis.call('HSET', sku_key, 'fence', token)
  -- Open-hold counts that do not parse go: the restore writes them again
  -- when the ledger has open holds, and none reads as zero.
  if (live[8] and not tonumber(live[8])) or (live[9] and not tonumber(live[9])) then
    redis.call('HDEL', sku_key, 'held', 'holds')
  end
else
  -- A missing SKU is created whole, so that warm.lua finds it live and can
  -- never stock it a second time while the restore runs.
  redis.call('HSET', sku_key, 'stock', ARGV[3], 'seq', ARGV[2], 'limit', ARGV[4],
    'status', 'open', 'fence', token)
end
if layout == 'one-hash' then
  -- The counts start at 0 over a hash that holds no record: restore_chunk.lua
  -- adds what each of its HSETs created, so that they end exact.
  start_one_hash(sku_key)
end
redis.call('UNLINK', buyers_key, requests_key)
return {1}
