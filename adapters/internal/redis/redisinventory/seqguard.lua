-- seqguard.lua: prepended to the compare-and-set scripts (stamp, fence,
-- correct; see scripts.go). guard_seq returns -1 when the SKU is not
-- warmed, -13 when its seq is no longer the one the caller checked or a
-- restore owns the SKU until it stamps it itself, and nil when the caller
-- may write.
local function guard_seq(key, expected)
  local live = redis.call('HMGET', key, 'seq', 'fence')
  if not live[1] then
    return -1
  end
  if live[1] ~= expected or string.sub(live[2] or '', 1, 10) == 'restoring:' then
    return -13
  end
  return nil
end
