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
// the server's used_memory when it was read.
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
	return f, nil
}
