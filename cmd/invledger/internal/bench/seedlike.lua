-- seedlike.lua: the seed's purchase script (check warmed, check stock,
-- check the repeat buyer, deduct, record the buyer) plus one XADD of the
-- event: the second ceiling of bench --compare, beside the service's own
-- deduct script. KEYS[1] stock, KEYS[2] buyers set, KEYS[3] stream;
-- ARGV[1] sku, ARGV[2] user, ARGV[3] qty.
local stock = tonumber(redis.call('GET', KEYS[1]))
if stock == nil then return -1 end
if stock < tonumber(ARGV[3]) then return 0 end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then return -2 end
redis.call('DECRBY', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('XADD', KEYS[3], '*', 'sku', ARGV[1], 'user', ARGV[2], 'qty', ARGV[3])
return 1
