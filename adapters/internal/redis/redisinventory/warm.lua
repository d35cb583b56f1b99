-- warm.lua: load a SKU's definition into Redis and append its stocked event
-- (entry.lua).
-- KEYS[1] sku hash, KEYS[2] partition stream
-- ARGV[1] sku id, ARGV[2] initial stock, ARGV[3] per-user limit, ARGV[4] event id,
-- ARGV[5] the layout of its records (records.lua): one-hash, or '' for the 1.0 layout
-- Reply: {1, stock, seq, status} when stocked now; {2, stock, seq, status} when
-- the SKU was already live, in which case nothing is written: re-warming must
-- never reset stock in the middle of a sale. A new SKU is stamped as verified
-- under this node's run (node.lua).
local sku_key, stream_key = KEYS[1], KEYS[2]
local sku, stock, limit, event_id, layout = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if layout ~= 'one-hash' and layout ~= '' then
  return redis.error_reply('warm.lua: layout ' .. tostring(layout) .. ', want one-hash or empty')
end

local live = redis.call('HMGET', sku_key, 'stock', 'seq', 'status')
if live[1] then
  return {2, tonumber(live[1]), tonumber(live[2]), live[3]}
end

-- All checks done; writes follow.
if layout == 'one-hash' then
  start_one_hash(sku_key)
end
redis.call('HSET', sku_key, 'stock', stock, 'seq', 1, 'limit', limit, 'status', 'open',
  'stocked_event_id', event_id, 'fence', node_run())
redis.call('XADD', stream_key, '*', 'e', entry(event_id, 'stocked', sku, 1, stock, stock))
return {1, tonumber(stock), 1, 'open'}
