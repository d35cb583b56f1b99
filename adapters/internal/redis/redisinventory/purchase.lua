-- purchase.lua: prepended to release.lua and the scripts that end a hold
-- (see scripts.go), so that they check the SKU alike; batch.lua reads the
-- same fields its own way, once per SKU of a call. live_sku only reads;
-- each script does every check before its first write.

-- live_sku reads the SKU's live fields {stock, limit, status, fence, seq,
-- held, holds} (the last two false while no hold is open), or returns nil
-- and a refusal: {-1} not warmed, {-20, key, message} a state that does not
-- read (sku_fault), {-4} recovering.
-- Fencing: the SKU was verified against the ledger under one run of the
-- node now executing (node.lua). A restart, or a replica promoted without
-- the last writes of its old master, leaves the fence of another run.
local function live_sku(sku_key)
  local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds')
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
-- write: {-20, key, message} when the count of one of users does not take
-- HINCRBY, which would fail halfway through the writes; nil otherwise.
local function allowance_fault(buyers_key, users)
  local counts = redis.call('HMGET', buyers_key, unpack(users))
  for i = 1, #users do
    if counts[i] and not string.match(counts[i], '^%-?%d+$') then
      return {-20, buyers_key, 'malformed sku state: the count of buyer ' .. users[i] .. ' is "' .. counts[i] .. '"'}
    end
  end
  return nil
end

-- free_allowance gives qty units of user's limit back: a write, for after
-- the checks (allowance_fault).
local function free_allowance(buyers_key, user, qty)
  if redis.call('HINCRBY', buyers_key, user, -qty) <= 0 then
    redis.call('HDEL', buyers_key, user)
  end
end
