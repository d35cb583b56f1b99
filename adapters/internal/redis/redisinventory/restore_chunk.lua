-- restore_chunk.lua: write one chunk of a restored SKU's buyers or request
-- receipts, only while the restore that sent it still holds the fence, so a
-- superseded restore can never overwrite a newer one.
-- KEYS[1] sku hash, KEYS[2] the buyers or requests hash
-- ARGV[1] restore token, ARGV[2..] field, value, field, value, ...
-- Reply: 1 written; -17 the fence no longer holds the token: nothing written.
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return -17
end
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
return 1
