-- node.lua: prepended to every script that writes or checks a SKU's fence
-- (see the package doc, "Fencing"). node_run names the history of the
-- node running the script: its master_replid. Redis draws a fresh one at
-- every start and shifts to a fresh one when a replica is promoted, while
-- a replica in sync shares its master's. A fence replicated from an old
-- master therefore never matches on the replica promoted after it, and
-- the caller's view of the topology, which can be stale for a moment, has
-- no part in the check.
local function node_run()
  return string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
end

-- fence_holds tells whether a SKU whose hash holds fence and epoch may be
-- sold, held, adjusted or closed on this node. Besides node_run(), it
-- accepts the fence the previous version stamped (the node's run_id, with
-- its LASTSAVE in field epoch), so that during a rolling deploy both
-- versions sell the SKUs the previous one verified (see the README,
-- Fencing). Both are read here, on the node running the script, so a
-- restart or a promoted replica fails either fence. The previous fence is
-- checked only when an epoch is present, which no current stamp leaves, so
-- a current fence costs nothing more.
local function fence_holds(fence, epoch)
  if fence == node_run() then
    return true
  end
  return epoch ~= false and tonumber(epoch) == redis.call('LASTSAVE')
    and fence == string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end
