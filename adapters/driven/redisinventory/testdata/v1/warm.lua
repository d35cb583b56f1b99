-- warm.lua: load a SKU's definition into Redis and append its stocked event.
-- KEYS[1] sku hash, KEYS[2] partition stream
-- ARGV[1] sku id, ARGV[2] initial stock, ARGV[3] per-user limit, ARGV[4] event id
-- Reply: {1, stock, seq, status} when stocked now; {2, stock, seq, status} when
-- the SKU was already live, in which case nothing is written: re-warming must
-- never reset stock in the middle of a sale. A new SKU is stamped as verified
-- under this Redis run (run_id and LASTSAVE), see deduct.lua.
local sku_key, stream_key = KEYS[1], KEYS[2]
local sku, stock, limit, event_id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local live = redis.call('HMGET', sku_key, 'stock', 'seq', 'status')
if live[1] then
  return {2, tonumber(live[1]), tonumber(live[2]), live[3]}
end

-- All checks done; writes follow.
local run_id = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local t = redis.call('TIME')
local ts = t[1] .. string.format('%06d', tonumber(t[2]))
local hash = chain_hash('', {event_id, 'stocked', sku, '1', stock, stock, stock, '', '', '', '', ts})
redis.call('HSET', sku_key, 'stock', stock, 'seq', 1, 'limit', limit, 'status', 'open',
  'stocked_event_id', event_id, 'fence', run_id, 'epoch', redis.call('LASTSAVE'), 'hash', hash)
redis.call('XADD', stream_key, '*',
  'event_id', event_id, 'type', 'stocked', 'sku', sku, 'seq', 1,
  'qty', stock, 'delta', stock, 'balance', stock, 'ts', ts, 'prev_hash', '', 'hash', hash)
return {1, tonumber(stock), 1, 'open'}
