package redisinventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// Buyers reads a SKU's buyers' counts in pages (HSCAN), so a large hash
// never blocks Redis: its buyers hash, or a one-hash SKU's u: fields
// (records.lua). archived is true when DropBuyers already dropped them,
// or began to drop a one-hash SKU's: what is left then is not the buyers,
// and none is returned. The pages are not one snapshot: callers check that
// the SKU's seq did not move across the read.
func (r *RedisArchiver) Buyers(ctx context.Context, sku domain.SKUID) (buyers map[string]int64, archived bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	v, err := r.client.HMGet(ctx, r.keys.SKUKey(s), "layout", "archived_at", "archiving").Result()
	if err != nil {
		return nil, false, fmt.Errorf("buyers of %s: %w", s, err)
	}
	layout, _ := v[0].(string)
	archived = v[1] != nil
	buyers = map[string]int64{}
	if layout != "" && (archived || v[2] != nil) {
		return buyers, true, nil
	}
	records := r.keys.recordsOf(s, layout)
	var cursor uint64
	for {
		kv, next, err := r.client.HScan(ctx, records.counts, cursor, matchPrefix(records.countPrefix), dropBuyersPage).Result()
		if err != nil {
			return nil, false, fmt.Errorf("buyers of %s: %w", s, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			user := strings.TrimPrefix(kv[i], records.countPrefix)
			n, err := strconv.ParseInt(kv[i+1], 10, 64)
			if err != nil {
				return nil, false, fmt.Errorf("buyers of %s: user %q holds %q: %w", s, user, kv[i+1], ErrScript)
			}
			buyers[user] = n
		}
		if next == 0 {
			return buyers, archived, nil
		}
		cursor = next
	}
}

// dropBuyersPage is the COUNT of the HSCANs that read a SKU's buyers, and
// the most u: fields one drop_buyers.lua call deletes: a page costs Redis
// well under a millisecond.
const dropBuyersPage = 1000

// DropBuyers deletes a closed SKU's buyers' counts and marks the SKU
// archived, provided its seq is still seq; otherwise it is
// ledger.ErrSeqMoved and nothing more changes. Dropping again is a no-op.
// An open SKU is ledger.ErrSKUOpen; a SKU not in Redis is
// domain.ErrNotWarmed.
//
// A one-hash SKU's counts are fields of its hash among its receipts, so
// they go a page at a time (drop_buyers.lua): an HSCAN finds a page, a
// script call deletes it, each call comparing the seq. A call that fails
// midway leaves the SKU marked (Buyers reports it archived), and running
// it again goes on. The script tells when none is left, by the SKU's
// exact count of them; one full HSCAN pass finds every field present
// throughout it, so a pass that finds none while the count says some are
// left means the count is wrong.
func (r *RedisArchiver) DropBuyers(ctx context.Context, sku domain.SKUID, seq int64) (err error) {
	defer translateInto(&err)
	s := sku.String()
	keys := []string{r.keys.SKUKey(s), r.keys.BuyersKey(s)}
	var (
		page           []any // u: fields found and not dropped yet
		cursor         uint64
		scanning       bool // a pass is under way: cursor is where it goes on
		scanned, found bool // a pass began; the last one found a field
	)
	for {
		n := min(len(page), dropBuyersPage)
		v, err := dropBuyersScript.Run(ctx, r.client, keys, append([]any{seq}, page[:n]...)...).Slice()
		if err != nil {
			return r.corrupt(ctx, fmt.Errorf("drop buyers of %s: %w", s, err), s)
		}
		page = page[n:]
		rp := newReply("drop buyers of "+s, v)
		if code := rp.Code(); rp.Err() != nil || code != codeNotArchived {
			_, err := rp.outcome(subject{sku: s})
			if err != nil {
				return r.corrupt(ctx, err, s)
			}
			return nil
		}
		left := rp.Int(1, "buyers")
		if err := rp.Err(); err != nil {
			return err
		}
		for len(page) == 0 {
			if !scanning {
				if scanned && !found {
					problem := fmt.Sprintf("buyers is %d, but the hash holds no u: field", left)
					return r.corrupt(ctx, &corruptReplyError{kind: ledger.RecordSKU, key: keys[0], problem: problem,
						err: fmt.Errorf("drop buyers of %s: %w: the state of sku %s does not read: %s", s, ErrScript, s, problem)}, s)
				}
				scanning, scanned, found = true, true, false
			}
			kv, next, err := r.client.HScan(ctx, keys[0], cursor, "u:*", dropBuyersPage).Result()
			if err != nil {
				return fmt.Errorf("drop buyers of %s: %w", s, err)
			}
			for i := 0; i+1 < len(kv); i += 2 {
				page = append(page, kv[i])
			}
			found = found || len(kv) > 0
			cursor = next
			if next == 0 {
				// The pass ended: the script says whether anything is left.
				scanning = false
				break
			}
		}
	}
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
