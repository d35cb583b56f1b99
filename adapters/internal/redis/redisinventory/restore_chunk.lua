-- restore_chunk.lua: write one chunk of a restored SKU's records (receipts,
-- buyers' counts, hold records), only while the restore that sent it still
-- holds the fence, so a superseded restore can never overwrite a newer one.
-- A one-hash SKU (records.lua) must keep its counts of receipts and buyers
-- exact, and HLEN cannot tell its r: and u: fields apart: a chunk of either
-- adds to its count what its HSET created, which counts a field written
-- twice (a chunk that go-redis sent again) once.
-- KEYS[1] sku hash, KEYS[2] the hash the chunk writes: the SKU's buyers or
-- requests hash, or the SKU hash itself (hold records; every record of a
-- one-hash SKU)
-- ARGV[1] restore token, ARGV[2] the SKU hash's count the chunk's fields add
-- to: receipts or buyers (one-hash), or '' (none), ARGV[3..] field, value, field, value, ...
-- Reply: 1 written; -17 the fence no longer holds the token: nothing written.
local count = ARGV[2]
if count ~= '' and count ~= 'receipts' and count ~= 'buyers' then
  return redis.error_reply('restore_chunk.lua: count ' .. tostring(count) .. ', want receipts, buyers or empty')
end
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return -17
end
local created = redis.call('HSET', KEYS[2], unpack(ARGV, 3))
if count ~= '' then
  redis.call('HINCRBY', KEYS[1], count, created)
end
return 1
