-- seedlike.lua: the seed's purchase script (check warmed, check stock,
-- check the repeat buyer, deduct, record the buyer) plus one XADD of the
-- event: the second ceiling of bench --compare, beside the service's own
-- deduct script. KEYS[1] stock, KEYS[2] buyers set, KEYS[3] stream;
-- ARGV[1] sku, ARGV[2] user, ARGV[3] qty.
-- ARGV[4], when given, spreads the sale over that many SKUs (bench --skus),
-- and then no keys are passed: the SKU is the buyer's number (ARGV[2] is
-- 'u' and digits) modulo ARGV[4], and its keys are named here, because
-- redis-benchmark draws each __rand_int__ of a command on its own, so keys
-- on the command line could not name the buyer's SKU. Keys a script does
-- not declare work on a standalone Redis only, which --compare's is.
local stock_key, buyers_key, stream_key = KEYS[1], KEYS[2], KEYS[3]
if ARGV[4] then
  local tag = 'bench:{seed-like-' .. (tonumber(string.sub(ARGV[2], 2)) % tonumber(ARGV[4])) .. '}:'
  stock_key, buyers_key, stream_key = tag .. 'stock', tag .. 'buyers', tag .. 'events'
end
local stock = tonumber(redis.call('GET', stock_key))
if stock == nil then return -1 end
if stock < tonumber(ARGV[3]) then return 0 end
if redis.call('SISMEMBER', buyers_key, ARGV[2]) == 1 then return -2 end
redis.call('DECRBY', stock_key, ARGV[3])
redis.call('SADD', buyers_key, ARGV[2])
redis.call('XADD', stream_key, '*', 'sku', ARGV[1], 'user', ARGV[2], 'qty', ARGV[3])
return 1
