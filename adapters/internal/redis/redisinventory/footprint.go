package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Footprint is what a SKU costs Redis: MEMORY USAGE of each of its keys
// (0 for a key that does not exist), of its partition's tombstone set, and
// the server's used_memory when it was read. A one-hash SKU (records.lua)
// keeps its buyers and receipts in its hash, so Buyers and Requests are
// then the shares of that hash's MEMORY USAGE estimated for its u: and r:
// fields (splitOneHash), and SKU the rest.
type Footprint struct {
	UsedMemory int64
	SKU        int64
	Buyers     int64
	Requests   int64
	Tombstones int64
}

// Keys is the bytes of the SKU's own keys: what retirement frees.
func (f Footprint) Keys() int64 { return f.SKU + f.Buyers + f.Requests }

// ReadFootprint measures sku's keys exactly (MEMORY USAGE with SAMPLES 0,
// which walks every field: for measurements, not for the hot path).
func ReadFootprint(ctx context.Context, client redis.UniversalClient, keys Keyspace, sku string) (f Footprint, err error) {
	defer translateInto(&err)
	info, err := client.Info(ctx, "memory").Result()
	if err != nil {
		return Footprint{}, fmt.Errorf("footprint of %s: %w", sku, err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			if f.UsedMemory, err = strconv.ParseInt(v, 10, 64); err != nil {
				return Footprint{}, fmt.Errorf("footprint of %s: used_memory %q: %w", sku, v, err)
			}
		}
	}
	for key, into := range map[string]*int64{keys.SKUKey(sku): &f.SKU, keys.BuyersKey(sku): &f.Buyers,
		keys.RequestsKey(sku): &f.Requests, keys.SKUTombstoneKey(sku): &f.Tombstones} {
		n, err := client.MemoryUsage(ctx, key, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Footprint{}, fmt.Errorf("footprint of %s: memory usage of %s: %w", sku, key, err)
		}
		*into = n
	}
	layout, err := LayoutField(ctx, client, keys.SKUKey(sku))
	if err != nil {
		return Footprint{}, fmt.Errorf("footprint of %s: %w", sku, err)
	}
	if layout == string(LayoutOneHash) {
		if err := splitOneHash(ctx, client, keys.SKUKey(sku), &f); err != nil {
			return Footprint{}, fmt.Errorf("footprint of %s: %w", sku, err)
		}
	}
	return f, nil
}

// footprintSamples is how many fields splitOneHash samples.
const footprintSamples = 2000

// hashEntryOverhead is what Redis adds to a hash field's own bytes, field
// and value: a dict entry (24 B) and two sds strings' headers and
// allocator rounding, about 40 B on 64-bit Linux with jemalloc. A one-hash
// SKU's hash is a dict from its first field (records.lua's
// start_one_hash).
const hashEntryOverhead = 40

// splitOneHash moves from f.SKU to f.Buyers and f.Requests the share of
// the SKU hash's bytes its u: and r: fields take: each kind's count (the
// hash's buyers and receipts counters, the rest HLEN's) times the mean
// size of its fields in a random sample (HRANDFIELD), plus
// hashEntryOverhead each.
func splitOneHash(ctx context.Context, client redis.UniversalClient, key string, f *Footprint) error {
	counts, err := client.HMGet(ctx, key, "receipts", "buyers").Result()
	if err != nil {
		return fmt.Errorf("its record counts: %w", err)
	}
	fields, err := client.HLen(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("HLEN %s: %w", key, err)
	}
	sample, err := client.HRandFieldWithValues(ctx, key, footprintSamples).Result()
	if err != nil {
		return fmt.Errorf("sample %s: %w", key, err)
	}
	var bytes, seen [3]float64 // receipts, buyers, the rest
	for _, kv := range sample {
		kind := 2
		if strings.HasPrefix(kv.Key, "r:") {
			kind = 0
		} else if strings.HasPrefix(kv.Key, "u:") {
			kind = 1
		}
		bytes[kind] += float64(len(kv.Key) + len(kv.Value) + hashEntryOverhead)
		seen[kind]++
	}
	receipts, _ := strconv.ParseFloat(fmt.Sprint(counts[0]), 64)
	buyers, _ := strconv.ParseFloat(fmt.Sprint(counts[1]), 64)
	n := [3]float64{receipts, buyers, max(float64(fields)-receipts-buyers, 0)}
	var share [3]float64
	total := 0.0
	for k := range share {
		if seen[k] > 0 {
			share[k] = n[k] * bytes[k] / seen[k]
		}
		total += share[k]
	}
	if total == 0 {
		return nil
	}
	requests, buyersBytes := int64(float64(f.SKU)*share[0]/total), int64(float64(f.SKU)*share[1]/total)
	f.Requests, f.Buyers, f.SKU = f.Requests+requests, f.Buyers+buyersBytes, f.SKU-requests-buyersBytes
	return nil
}
