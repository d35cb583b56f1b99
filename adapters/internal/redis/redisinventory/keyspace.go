package redisinventory

import (
	"fmt"
	"strconv"
)

// DefaultPartitions is the number of partition streams when none is configured.
const DefaultPartitions = 16

// Keyspace maps SKUs to partitions and partitions to Redis keys. Every key of
// one SKU carries its partition's hash tag, so a script's keys share one
// Redis Cluster slot. The partition count is fixed for a deployment: changing
// it moves SKUs to other keys. It also names the layout (SKULayout) of the
// SKUs warmed or restored through it: one SKU's records are in its hash or
// in two keys of their own.
type Keyspace struct {
	partitions int
	layout     SKULayout
}

// NewKeyspace returns the keyspace for a deployment with the given partition count.
func NewKeyspace(partitions int) (Keyspace, error) {
	if partitions < 1 || partitions > 1024 {
		return Keyspace{}, fmt.Errorf("partitions must be between 1 and 1024, got %d", partitions)
	}
	return Keyspace{partitions: partitions}, nil
}

// WithLayout returns k with new SKUs in layout l, which must be valid.
func (k Keyspace) WithLayout(l SKULayout) Keyspace {
	k.layout = l
	return k
}

// Layout is the layout of the SKUs warmed or restored from now on:
// DefaultSKULayout unless WithLayout set another.
func (k Keyspace) Layout() SKULayout {
	if k.layout == "" {
		return DefaultSKULayout
	}
	return k.layout
}

// Partitions returns the partition count.
func (k Keyspace) Partitions() int { return k.partitions }

// Partition returns the SKU's partition: FNV-1a of the id modulo the count,
// stable across processes and releases.
// FNV-1a is computed in place: the purchase path asks for it on every
// attempt, and hash/fnv would allocate.
func (k Keyspace) Partition(sku string) int {
	h := uint32(fnvOffset32)
	for i := 0; i < len(sku); i++ {
		h ^= uint32(sku[i])
		h *= fnvPrime32
	}
	return int(h % uint32(k.partitions))
}

// The FNV-1a constants of 32 bits.
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// tag is the hash tag of a partition, {p07} or {p123}.
func tag(partition int) string {
	if partition < 10 {
		return "{p0" + strconv.Itoa(partition) + "}"
	}
	return "{p" + strconv.Itoa(partition) + "}"
}

// SKUKey is the hash holding a SKU's stock, seq, limit and status.
func (k Keyspace) SKUKey(sku string) string {
	return "inv:" + tag(k.Partition(sku)) + ":sku:" + sku
}

// BuyersKey is the hash of user to units held.
func (k Keyspace) BuyersKey(sku string) string {
	return "inv:" + tag(k.Partition(sku)) + ":buyers:" + sku
}

// RequestsKey is the hash of deduction request id to its receipt, which makes
// retries idempotent and tells a release what to return.
func (k Keyspace) RequestsKey(sku string) string {
	return "inv:" + tag(k.Partition(sku)) + ":requests:" + sku
}

// RefusalsKey is the hash of a SKU's refused purchases by reason, which
// every serve process adds its counts to (adapters/internal/redis/refusals). It expires
// when no refusal came for a while and is not part of SKUKeys: it is a
// figure for the console, not the SKU's state.
func (k Keyspace) RefusalsKey(sku string) string {
	return "inv:" + tag(k.Partition(sku)) + ":refusals:" + sku
}

// TombstoneKey is a partition's set of retired SKUs: one set per partition,
// so a retired SKU costs Redis its id and a few bytes, and the refusal path
// tells a retired SKU from an unknown one without asking PostgreSQL.
func (k Keyspace) TombstoneKey(partition int) string {
	return "inv:" + tag(partition) + ":retired"
}

// SKUTombstoneKey is the tombstone set of the SKU's partition.
func (k Keyspace) SKUTombstoneKey(sku string) string { return k.TombstoneKey(k.Partition(sku)) }

// SKUKeys lists every key that holds the SKU's own state: its hash, buyers
// and receipts. Retirement removes exactly these.
func (k Keyspace) SKUKeys(sku string) []string {
	return []string{k.SKUKey(sku), k.BuyersKey(sku), k.RequestsKey(sku)}
}

// ExpiryKey is a partition's expiry set: its open holds, "<sku> <hold_id>"
// scored by their deadline in Redis milliseconds, which the sweepers read.
func (k Keyspace) ExpiryKey(partition int) string {
	return "inv:" + tag(partition) + ":holds"
}

// SKUExpiryKey is the expiry set of the SKU's partition.
func (k Keyspace) SKUExpiryKey(sku string) string { return k.ExpiryKey(k.Partition(sku)) }

// HoldKeys are the five keys of a hold script, in its KEYS order: the SKU's
// hash, buyers and requests, its partition's expiry set and stream, all in
// the partition's slot.
func (k Keyspace) HoldKeys(sku string) []string {
	return []string{k.SKUKey(sku), k.BuyersKey(sku), k.RequestsKey(sku), k.SKUExpiryKey(sku), k.SKUStreamKey(sku)}
}

// StreamKey is a partition's event stream, one Watermill topic.
func (k Keyspace) StreamKey(partition int) string {
	return "inv:" + tag(partition) + ":events"
}

// SKUStreamKey is the stream the SKU's events go to.
func (k Keyspace) SKUStreamKey(sku string) string { return k.StreamKey(k.Partition(sku)) }

// StreamKeys lists every partition stream.
func (k Keyspace) StreamKeys() []string {
	keys := make([]string, k.partitions)
	for p := range keys {
		keys[p] = k.StreamKey(p)
	}
	return keys
}

// OrderKey is the record of an order: the order as it was placed (user, ttl
// and lines), written once and never changed, so that its lines can be found
// again by the order id. It keeps no state: each line's state is its hold.
func (k Keyspace) OrderKey(orderID string) string {
	return "inv:" + tag(k.Partition(orderID)) + ":order:" + orderID
}
