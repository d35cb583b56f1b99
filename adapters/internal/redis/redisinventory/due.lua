-- due.lua: the entries of a partition's expiry set whose deadline passed,
-- by the clock of the Redis that holds the set (hold.lua). hold_end.lua
-- judges each one by that clock again, so this only chooses candidates.
-- KEYS[1] partition expiry set
-- ARGV[1] the most entries to return
-- Reply: up to ARGV[1] entries "<sku> <hold_id>", earliest deadline first.
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[1]))
