package redisinventory

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// RedisArchiver closes sales in Redis, drops their buyers once they are
// archived to SQL, and retires them.
type RedisArchiver struct {
	client redis.UniversalClient
	keys   Keyspace
}

var _ ledger.InventoryArchiver = (*RedisArchiver)(nil)

// NewRedisArchiver returns an archiver over client using keys' layout.
func NewRedisArchiver(client redis.UniversalClient, keys Keyspace) *RedisArchiver {
	return &RedisArchiver{client: client, keys: keys}
}

// CloseSKU marks a SKU closed with the Redis time, so batch.lua refuses new
// purchases, and appends its closed event (id eventID, by actor). already
// is true, and closedAt the original time, when it was closed before; no
// event is appended then. A SKU that is not in Redis is
// domain.ErrNotWarmed; one not verified under this node's run is
// domain.ErrRecovering.
func (r *RedisArchiver) CloseSKU(ctx context.Context, sku domain.SKUID, eventID, actor string) (closedAt time.Time, already bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	keys := []string{r.keys.SKUKey(s), r.keys.SKUStreamKey(s)}
	v, err := closeScript.Run(ctx, r.client, keys, s, eventID, actor).Slice()
	if err != nil {
		return time.Time{}, false, r.corrupt(ctx, fmt.Errorf("close %s: %w", sku, err), s)
	}
	rp := newReply("close "+s, v)
	code, err := rp.outcome(subject{sku: s})
	if err != nil {
		return time.Time{}, false, r.corrupt(ctx, err, s)
	}
	at := rp.Micros(1, "closed_at")
	if err := rp.Err(); err != nil {
		return time.Time{}, false, err
	}
	return at, code == codeDoneBefore, nil
}

// corrupt is the *ledger.CorruptRecordError of a close that met sku's
// state not reading (asCorrupt), else err. It reports nothing: the
// reconciler's next run, a purchase or a GET of the SKU does, and has it
// restored, after which the close is retried.
func (r *RedisArchiver) corrupt(ctx context.Context, err error, sku string) error {
	if ce, ok := asCorrupt(ctx, r.client, r.keys, err, ledger.CorruptRecord{SKU: sku}); ok {
		return ce
	}
	return err
}

// Buyers reads a SKU's buyers hash in pages (HSCAN), so a large hash never
// blocks Redis. archived is true when DropBuyers already deleted it. The
// pages are not one snapshot: callers check that the SKU's seq did not move
// across the read.
func (r *RedisArchiver) Buyers(ctx context.Context, sku domain.SKUID) (buyers map[string]int64, archived bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	archived, err = r.client.HExists(ctx, r.keys.SKUKey(s), "archived_at").Result()
	if err != nil {
		return nil, false, fmt.Errorf("buyers of %s: %w", s, err)
	}
	buyers = map[string]int64{}
	key := r.keys.BuyersKey(s)
	var cursor uint64
	for {
		kv, next, err := r.client.HScan(ctx, key, cursor, "", 1000).Result()
		if err != nil {
			return nil, false, fmt.Errorf("buyers of %s: %w", s, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n, err := strconv.ParseInt(kv[i+1], 10, 64)
			if err != nil {
				return nil, false, fmt.Errorf("buyers of %s: user %q holds %q: %w", s, kv[i], kv[i+1], ErrScript)
			}
			buyers[kv[i]] = n
		}
		if next == 0 {
			return buyers, archived, nil
		}
		cursor = next
	}
}

// DropBuyers deletes a closed SKU's buyers hash and marks the SKU archived,
// provided its seq is still seq; otherwise it is ledger.ErrSeqMoved and
// nothing changes. Dropping again is a no-op. An open SKU is
// ledger.ErrSKUOpen; a SKU not in Redis is domain.ErrNotWarmed.
func (r *RedisArchiver) DropBuyers(ctx context.Context, sku domain.SKUID, seq int64) (err error) {
	defer translateInto(&err)
	s := sku.String()
	v, err := dropBuyersScript.Run(ctx, r.client, []string{r.keys.SKUKey(s), r.keys.BuyersKey(s)}, seq).Slice()
	if err != nil {
		return fmt.Errorf("drop buyers of %s: %w", s, err)
	}
	_, err = newReply("drop buyers of "+s, v).outcome(subject{sku: s})
	return err
}

// Retire removes the keys of a closed, archived SKU and tombstones it,
// provided its seq is still seq; see ledger.InventoryArchiver.
func (r *RedisArchiver) Retire(ctx context.Context, sku domain.SKUID, seq int64) (already bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	keys := append(r.keys.SKUKeys(s), r.keys.SKUTombstoneKey(s))
	v, err := retireScript.Run(ctx, r.client, keys, s, seq).Slice()
	if err != nil {
		return false, fmt.Errorf("retire %s: %w", s, err)
	}
	rp := newReply("retire "+s, v)
	code, err := rp.outcome(subject{sku: s})
	if err != nil {
		return false, err
	}
	return code == codeDoneBefore, nil
}
