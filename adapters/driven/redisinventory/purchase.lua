-- purchase.lua: prepended to the scripts that sell or hold units (see
-- scripts.go), so that a deduct and a reserve (batch.lua) refuse exactly alike and the
-- scripts that end a hold check the SKU as they do. The functions only
-- read; each script does every check before its first write.

-- live_sku reads the SKU's live fields {stock, limit, status, fence, seq,
-- held, holds} (the last two nil while no hold is open), or returns nil and a refusal: {-1} not warmed, {-4} recovering.
-- Fencing: the SKU was verified against the ledger under one run of the
-- node now executing (node.lua). A restart, or a replica promoted without
-- the last writes of its old master, leaves the fence of another run.
local function live_sku(sku_key)
  local live = redis.call('HMGET', sku_key, 'stock', 'limit', 'status', 'fence', 'seq', 'held', 'holds')
  if not live[1] then
    return nil, {-1}
  end
  if not fence_holds(live[4]) then
    return nil, {-4}
  end
  return live
end

-- allowance checks that user may take qty more units of a live SKU: the
-- per-user limit counts every unit the buyers hash keeps for the user, sold
-- and held alike. It returns the user's units and the stock, or nil, nil and
-- a refusal: {-5} closed, {-3} qty above the limit, {-2} limit reached,
-- {0, stock} sold out.
local function allowance(live, buyers_key, user, qty)
  if live[3] == 'closed' then
    return nil, nil, {-5}
  end
  local limit = tonumber(live[2])
  if qty > limit then
    return nil, nil, {-3}
  end
  local counted = tonumber(redis.call('HGET', buyers_key, user) or '0')
  if counted + qty > limit then
    return nil, nil, {-2}
  end
  local stock = tonumber(live[1])
  if stock < qty then
    return nil, nil, {0, stock}
  end
  return counted, stock
end

-- free_allowance gives qty units of user's limit back: a write, for after
-- the checks.
local function free_allowance(buyers_key, user, qty)
  if redis.call('HINCRBY', buyers_key, user, -qty) <= 0 then
    redis.call('HDEL', buyers_key, user)
  end
end
