-- drop_buyers.lua: delete a closed SKU's buyers' counts once SQL holds them
-- (otherwise the buyers of finished sales grow Redis without bound), then
-- mark it archived (archived_at). Compare-and-set on seq: the caller checked
-- the buyers against the ledger at that seq, and a release since then would
-- make the archive stale.
-- A SKU of the 1.0 layout (records.lua) keeps its counts in a hash of their
-- own, which one UNLINK drops. A one-hash SKU keeps them as u: fields of its
-- hash, beside its receipts, so they go in steps that never block Redis:
-- each call deletes one page of them, which the caller found by HSCAN, and
-- archived_at comes with the call that leaves none. Every step compares the
-- seq again, and refuses while a restore owns the SKU (its fence), whose
-- writes a step would otherwise delete. The first step marks the SKU
-- (archiving, the seq the drop began at), so that RedisArchiver.Buyers
-- never offers what is left after a crash as the SKU's buyers: the ledger
-- fold is the record then, as after a drop whose SQL commit failed, and a
-- new call goes on where the crash stopped. The count of buyers stays exact
-- (HDEL's count), for retire.lua to tell when none is left.
-- KEYS[1] sku hash, KEYS[2] buyers hash
-- ARGV[1] the seq at which the buyers were checked, ARGV[2..] a one-hash
-- SKU's page of u: fields to delete (none in a first call, and for the 1.0
-- layout)
-- Reply: {1, archived_at} dropped now; {2, archived_at} dropped before;
-- {-15, buyers} a one-hash SKU still holds that many buyers' counts, this
-- page deleted: drop the next; {-13} seq moved, or a restore owns the SKU;
-- {-1} not warmed; {-14} the SKU is not closed; {-20, key, message} a
-- one-hash SKU's count of buyers does not read, or is below the fields of
-- the page that exist: nothing written.
local sku_key, buyers_key, seq = KEYS[1], KEYS[2], ARGV[1]
local live = redis.call('HMGET', sku_key, 'stock', 'seq', 'status', 'archived_at', 'fence', 'layout', 'buyers')
if not live[1] then
  return {-1}
end
if live[4] then
  return {2, live[4]}
end
if live[3] ~= 'closed' then
  return {-14}
end
if live[2] ~= seq then
  return {-13}
end

local function now()
  local t = redis.call('TIME')
  return t[1] .. string.format('%06d', tonumber(t[2]))
end

if not live[6] then
  -- All checks done; writes follow.
  local ts = now()
  redis.call('UNLINK', buyers_key)
  redis.call('HSET', sku_key, 'archived_at', ts)
  return {1, ts}
end

if string.sub(live[5] or '', 1, 10) == 'restoring:' then
  return {-13}
end
local count = tonumber(live[7])
if live[6] ~= 'one-hash' or not count then
  local bad = live[6] ~= 'one-hash' and 'layout' or 'buyers'
  local v = live[6] ~= 'one-hash' and live[6] or live[7]
  return {-20, sku_key, 'malformed sku state: ' .. bad .. ' is ' .. (v and ('"' .. v .. '"') or 'missing')}
end
-- A page can name a field twice, or one already gone (HSCAN may return a
-- field again, and a call sent again after a lost reply sends its page
-- again): only those that exist leave the count.
local fields, seen = {}, {}
for i = 2, #ARGV do
  local field = ARGV[i]
  if string.sub(field, 1, 2) ~= 'u:' then
    return redis.error_reply('drop_buyers.lua: field ' .. field .. ' of the page is no buyer\'s count')
  end
  if not seen[field] then
    seen[field], fields[#fields + 1] = true, field
  end
end
local present = 0
if #fields > 0 then
  for _, v in ipairs(redis.call('HMGET', sku_key, unpack(fields))) do
    if v then
      present = present + 1
    end
  end
  if present > count then
    return {-20, sku_key, 'malformed sku state: buyers is "' .. live[7] .. '", below the ' .. present ..
      ' counts of one page'}
  end
end

-- All checks done; writes follow.
if present > 0 then
  count = count - redis.call('HDEL', sku_key, unpack(fields))
end
if count > 0 then
  redis.call('HSET', sku_key, 'buyers', string.format('%d', count), 'archiving', seq)
  return {-15, count}
end
local ts = now()
redis.call('HSET', sku_key, 'buyers', 0, 'archived_at', ts)
redis.call('HDEL', sku_key, 'archiving')
return {1, ts}
