// Package redisinventory keeps live SKU inventory in Redis. Every purchase is
// one Lua script (the *.lua files, embedded) that checks, deducts and
// appends its event to the SKU's partition stream, so a deduction and its
// event can never drift apart.
//
// # Scripts
//
// scripts.go is the table of the scripts: each script file with the
// fragments (files that only define functions: node.lua, entry.lua,
// receipt.lua, purchase.lua, hold.lua, seqguard.lua) prepended to it. Load
// preloads every script of the table, and a test fails for a .lua file
// that is in it neither way. A script answers with a reply code, which
// means the same in every script that gives it; codes.go names the codes
// and maps each refusal to its error once, for every decoder.
//
// It owns the Redis key layout (Keyspace: a partition hash tag on every
// key, so one script's keys share a Redis Cluster slot) and the stream
// entry format (an entry holds one or more events, see ParseEntryEvents),
// which ParseEntryEvents decodes for the projector, the reconciler and the
// tail alike. One adapter type serves each port role, all over one
// go-redis client: RedisInventory (purchases), RedisRestorer,
// RedisArchiver (close, archive, retire), RedisReconcileSource and
// RedisNodeRuns. A retired SKU keeps no key of its own: its id stays in its
// partition's tombstone set (Keyspace.TombstoneKey).
//
// # Fencing
//
// A SKU sells only while its hash's "fence" field names the run of the
// node executing the script: node_run() of node.lua, the node's
// master_replid. Redis draws a new one at every start and shifts it when a
// replica is promoted, so after a restart or a failover every SKU refuses
// until the reconciler has checked it against the ledger and stamped it
// (stamp.lua, correct.lua, restore_finish.lua, and warm.lua for a new SKU).
// Every script on the purchase path, and any new one (holds: reserve,
// confirm, cancel, expire), follows the same rule:
//
//   - build the script on nodeLua in the table, and check the fence with
//     fence_holds(fence) before the first write, answering recovering
//     (codeRecovering, -4: domain.ErrRecovering) when it does not hold; a fence
//     of "restoring:..." or "repairing" never holds, so a SKU being
//     restored or repaired refuses too. RedisReconcileSource counts the
//     same fence as verified;
//   - never take the node's identity as an argument from the caller: a
//     caller's view of the topology can be stale for a moment (a retried
//     command, a pool connection to the new master), and a promoted
//     replica holds the old master's fence;
//   - a script that stamps writes node_run() into "fence" only when the
//     state is the one checked against the ledger: the seq the reconciler
//     verified (guard_seq), the restore's own token (restore_finish.lua),
//     or a SKU that did not exist (warm.lua);
//   - a replay of an earlier request (same request or hold id) is checked
//     against the fence too: the receipt it would return may be one the
//     failover lost.
package redisinventory
