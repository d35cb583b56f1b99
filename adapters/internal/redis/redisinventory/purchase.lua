-- purchase.lua: prepended to release.lua and the scripts that end a hold
-- (see scripts.go), so that they check the SKU alike; batch.lua reads the
-- same fields its own way, once per SKU of a call. live_sku only reads;
-- each script does every check before its first write.

-- live_sku reads the SKU's live fields {stock, limit, status, fence, seq,
-- held, holds} (the last two false while no hold is open) and after them
-- its layout, receipts and buyers (records.lua; all three false in the 1.0
-- layout), so that a caller knows where its records are before it reads
-- one, at no extra call. It returns them, or nil and a refusal: {-1} not
-- warmed, {-20, key, message} a state that does not read (sku_fault),
-- {-4} recovering.
-- Fencing: the SKU was verified against the ledger under one run of the
-- node now executing (node.lua). A restart, or a replica promoted without
-- the last writes of its old master, leaves the fence of another run.
local function live_sku(sku_key)
  local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds', 'layout',
    'receipts', 'buyers')
  if not live[1] and not live[5] then
    return nil, {-1}
  end
  local fault = sku_fault(live)
  if fault then
    return nil, {-20, sku_key, 'malformed sku state: ' .. fault}
  end
  if not fence_holds(live[4]) then
    return nil, {-4}
  end
  return live
end

-- allowance_fault is the check free_allowance needs before the first
-- write: {-20, key, message} when the count of one of users, field
-- count_prefix .. user of counts_key (records_of), does not take HINCRBY,
-- which would fail halfway through the writes; nil otherwise.
local function allowance_fault(counts_key, count_prefix, users)
  local fields = {}
  for i = 1, #users do
    fields[i] = count_prefix .. users[i]
  end
  local counts = redis.call('HMGET', counts_key, unpack(fields))
  for i = 1, #users do
    if counts[i] and not string.match(counts[i], '^%-?%d+$') then
      return {-20, counts_key, 'malformed sku state: the count of buyer ' .. users[i] .. ' is "' .. counts[i] .. '"'}
    end
  end
  return nil
end

-- free_allowance gives qty units of user's limit back: a write, for after
-- the checks (allowance_fault). A count that reaches 0 goes, so that a
-- buyer who holds nothing costs nothing, and in a one-hash SKU the count
-- of buyers with it; a count already gone (a closed SKU's buyers dropped
-- by drop_buyers.lua) was not counted, so its absence moves nothing.
local function free_allowance(layout, sku_key, counts_key, count_prefix, user, qty)
  local field = count_prefix .. user
  local counted = layout == 'one-hash' and redis.call('HEXISTS', counts_key, field) == 1
  if redis.call('HINCRBY', counts_key, field, -qty) <= 0 then
    redis.call('HDEL', counts_key, field)
    if counted then
      count_records(layout, sku_key, 'buyers', -1)
    end
  end
end
