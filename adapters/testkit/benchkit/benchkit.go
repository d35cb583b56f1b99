// Package benchkit is what benchmarks and the lab (invledger-lab) reach in
// an application beyond its public API: its keyspace, the memory a SKU
// costs Redis, a purchase service over a client of their own, and the
// wait for the ledger to equal Redis. It hands out no internal type.
package benchkit

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/ledger"
)

// Keys names a SKU's Redis keys.
type Keys interface {
	SKUKey(sku string) string
	BuyersKey(sku string) string
	RequestsKey(sku string) string
	SKUStreamKey(sku string) string
}

// KeysOf is a's keyspace.
func KeysOf(a *app.Application) Keys { return approot.Of(a).Keys }

// LoadScripts loads the purchase scripts into Redis, so a measurement does
// not time their first load.
func LoadScripts(ctx context.Context, a *app.Application) error {
	_, err := approot.Of(a).Adapters.Inventory.Load(ctx)
	return err
}

// Footprint is the memory a SKU's keys take in Redis, and Redis's total.
type Footprint struct {
	UsedMemory int64
	SKU        int64
	Buyers     int64
	Requests   int64
	Tombstones int64
}

// ReadFootprint measures sku's keys exactly (MEMORY USAGE with SAMPLES 0,
// which walks every field: for measurements, not for the hot path).
func ReadFootprint(ctx context.Context, a *app.Application, sku string) (Footprint, error) {
	f, err := redisinventory.ReadFootprint(ctx, a.Redis, approot.Of(a).Keys, sku)
	return Footprint{UsedMemory: f.UsedMemory, SKU: f.SKU, Buyers: f.Buyers, Requests: f.Requests, Tombstones: f.Tombstones}, err
}

// ServiceOver is a purchase service over client instead of a's own Redis
// client (one the caller hooks to count its commands), sharing a's
// keyspace and PostgreSQL stores.
func ServiceOver(a *app.Application, client redis.UniversalClient) (*ledger.Service, error) {
	p := approot.Of(a)
	inv, err := redisinventory.NewRedisInventory(client, p.Keys, redisinventory.InventoryConfig{})
	if err != nil {
		return nil, err
	}
	return ledger.NewService(inv, p.Adapters.SKUs, p.Adapters.Ledger, p.Adapters.Operations), nil
}

// WaitLedgerEqualsRedis polls until the ledger's balance and seq for sku
// equal Redis's, and returns how long that took; false once timeout passed.
func WaitLedgerEqualsRedis(ctx context.Context, a *app.Application, sku string, timeout time.Duration) (bool, time.Duration, error) {
	start := time.Now()
	for {
		v, err := a.Service.State(ctx, sku)
		if err != nil {
			return false, 0, err
		}
		if v.LedgerStock != nil && *v.LedgerStock == *v.RedisStock && *v.LedgerSeq == *v.RedisSeq {
			var sum, rows int64
			err := a.Pool.QueryRow(ctx, `SELECT COALESCE(SUM(delta), 0), count(*) FROM ledger_entries WHERE sku = $1`, sku).Scan(&sum, &rows)
			if err != nil {
				return false, 0, err
			}
			if sum == *v.RedisStock && rows == *v.RedisSeq {
				return true, time.Since(start), nil
			}
		}
		if time.Since(start) > timeout {
			return false, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return false, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
