-- hold_show.lua: one hold's state, judged by Redis's clock (hold.lua), and
-- for a confirmed hold whether its sale was released since (its request
-- id's receipt then starts with R, receipt.lua).
-- KEYS[1] sku hash, KEYS[2] requests hash
-- ARGV[1] hold id
-- Reply: hold_reply with code 1, then released (1 or 0); {-1} not warmed;
-- {-9} no such hold.
local live = redis.call('HMGET', KEYS[1], 'seq', 'hold:' .. ARGV[1])
if not live[1] then
  return {-1}
end
if not live[2] then
  return {-9}
end
local h = read_hold(live[2])
local released = 0
if h.status == 'confirmed' and string.byte(redis.call('HGET', KEYS[2], h.request_id) or '', 1) == 82 then
  released = 1
end
local reply = hold_reply(1, h, now_ms())
reply[#reply + 1] = released
return reply
