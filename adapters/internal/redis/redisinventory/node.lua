-- node.lua: prepended to every script that writes or checks a SKU's fence
-- (see the package doc, "Fencing"). node_run names the history of the
-- node running the script: its master_replid. Redis draws a fresh one at
-- every start and shifts to a fresh one when a replica is promoted, while
-- a replica in sync shares its master's. A fence replicated from an old
-- master therefore never matches on the replica promoted after it, and
-- the caller's view of the topology, which can be stale for a moment, has
-- no part in the check.
local function node_run()
  -- A plain find, then a match anchored where the field's value starts:
  -- an unanchored pattern would be tried at every byte before it.
  local info = redis.call('INFO', 'replication')
  local _, name_end = string.find(info, 'master_replid:', 1, true)
  return name_end and string.match(info, '^%x+', name_end + 1)
end

-- fence_holds tells whether a SKU whose hash holds fence may be sold, held,
-- adjusted or closed on this node. The run is read here, on the node
-- running the script, so a restart or a promoted replica fails the fence.
local function fence_holds(fence)
  return fence == node_run()
end
