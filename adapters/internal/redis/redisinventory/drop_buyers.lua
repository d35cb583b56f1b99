-- drop_buyers.lua: delete a closed SKU's buyers hash once SQL holds them
-- (otherwise the buyers of finished sales grow Redis without bound). Compare-and-set
-- on seq: the caller checked the buyers against the ledger at that seq, and
-- a release since then would make the archive stale.
-- KEYS[1] sku hash, KEYS[2] buyers hash
-- ARGV[1] the seq at which the buyers were checked
-- Reply: {1, archived_at} dropped now; {2, archived_at} dropped before;
-- {-13} seq moved; {-1} not warmed; {-14} the SKU is not closed.
local live = redis.call('HMGET', KEYS[1], 'stock', 'seq', 'status', 'archived_at')
if not live[1] then
  return {-1}
end
if live[4] then
  return {2, live[4]}
end
if live[3] ~= 'closed' then
  return {-14}
end
if live[2] ~= ARGV[1] then
  return {-13}
end

-- All checks done; writes follow.
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('UNLINK', KEYS[2])
redis.call('HSET', KEYS[1], 'archived_at', ts)
return {1, ts}
