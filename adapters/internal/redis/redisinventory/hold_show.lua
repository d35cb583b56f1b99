-- hold_show.lua: one hold's state, judged by Redis's clock and its
-- request id's receipt (hold_reply, hold.lua).
-- KEYS[1] sku hash, KEYS[2] requests hash
-- ARGV[1] hold id
-- Reply: hold_reply with code 1; {-1} not warmed; {-9} no such hold.
local live = redis.call('HMGET', KEYS[1], 'seq', 'hold:' .. ARGV[1])
if not live[1] then
  return {-1}
end
if not live[2] then
  return {-9}
end
return hold_reply(1, read_hold(live[2]), now_ms(), KEYS[2])
