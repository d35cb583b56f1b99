// Package redisinventory keeps live SKU inventory in Redis. Every purchase is
// one Lua script (the *.lua files, embedded) that checks, deducts and
// appends its event to the SKU's partition stream, so a deduction and its
// event can never drift apart.
//
// It owns the Redis key layout (Keyspace: a partition hash tag on every
// key, so one script's keys share a Redis Cluster slot) and the stream
// entry format, which ParseEntry decodes for the projector and the
// reconciler alike. One adapter type serves each port role, all over one
// go-redis client: RedisInventory (purchases), RedisRestorer,
// RedisArchiver (close, archive, retire), RedisReconcileSource and
// RedisEpoch. A retired SKU keeps no key of its own: its id stays in its
// partition's tombstone set (Keyspace.TombstoneKey).
package redisinventory
