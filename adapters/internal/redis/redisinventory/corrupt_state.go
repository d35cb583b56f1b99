package redisinventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// typedKey is a key with the type the scripts write it as.
type typedKey struct {
	key, want string
}

// skuTypedKeys are the keys of one SKU's own state (ledger.RecordSKU),
// the refusal counters included, hash first.
func (k Keyspace) skuTypedKeys(sku string) []typedKey {
	return []typedKey{{k.SKUKey(sku), "hash"}, {k.BuyersKey(sku), "hash"}, {k.RequestsKey(sku), "hash"}, {k.RefusalsKey(sku), "hash"}}
}

// partitionTypedKeys are the keys that every SKU of a partition shares
// (ledger.RecordPartitionKey).
func (k Keyspace) partitionTypedKeys(partition int) []typedKey {
	return []typedKey{{k.StreamKey(partition), "stream"}, {k.ExpiryKey(partition), "zset"}, {k.TombstoneKey(partition), "set"}}
}

// wrongTyped reads the type of every key in one pipeline (all share one
// partition's slot) and returns the first holding another type than the
// scripts write, with what it holds; a missing key is fine. ok is false
// when every key reads.
func wrongTyped(ctx context.Context, client redis.UniversalClient, keys []typedKey) (_ typedKey, problem string, ok bool, err error) {
	cmds := make([]*redis.StatusCmd, len(keys))
	if _, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Type(ctx, k.key)
		}
		return nil
	}); err != nil {
		return typedKey{}, "", false, fmt.Errorf("read the types of %d keys: %w", len(keys), err)
	}
	for i, k := range keys {
		if got := cmds[i].Val(); got != k.want && got != "none" {
			return k, fmt.Sprintf("a %s, not a %s", got, k.want), true, nil
		}
	}
	return typedKey{}, "", false, nil
}

// wrongTypeKey finds the key behind a WRONGTYPE that a script met on sku
// and did not name: one of the SKU's own keys (ledger.RecordSKU), else
// one of its partition's (ledger.RecordPartitionKey). A zero Kind means
// every key reads by now.
func wrongTypeKey(ctx context.Context, client redis.UniversalClient, keys Keyspace, sku string) (ledger.CorruptRecord, error) {
	if k, problem, ok, err := wrongTyped(ctx, client, keys.skuTypedKeys(sku)); err != nil || ok {
		return ledger.CorruptRecord{SKU: sku, Kind: ledger.RecordSKU, Key: k.key, Problem: problem}, err
	}
	k, problem, ok, err := wrongTyped(ctx, client, keys.partitionTypedKeys(keys.Partition(sku)))
	if err != nil || !ok {
		return ledger.CorruptRecord{}, err
	}
	return ledger.CorruptRecord{Kind: ledger.RecordPartitionKey, Key: k.key, Problem: problem}, nil
}

// liveFields are the fields of a SKU hash that the scripts read to sell,
// in the order sku_fault (skustate.lua) takes them: the layout of its
// records (records.lua) and a one-hash SKU's counts of them last.
var liveFields = []string{"stock", "limit", "status", "fence", "seq", "held", "holds", "layout", "receipts", "buyers"}

// layoutOf is the layout field of values, HMGET's reply for liveFields.
func layoutOf(values []any) string {
	layout, _ := values[7].(string)
	return layout
}

// liveFault is sku_fault of skustate.lua over values, HMGET's reply for
// liveFields: the first field that does not read, shown as the script
// shows it, or "". It is stricter than Lua's tonumber (an integer, as the
// scripts write them), which only costs a restore that was not needed.
func liveFault(values []any) string {
	str := func(i int) (string, bool) {
		s, ok := values[i].(string)
		return s, ok
	}
	integer := func(i int, optional bool) bool {
		s, ok := str(i)
		if !ok {
			return optional && values[i] == nil
		}
		_, err := strconv.ParseInt(s, 10, 64)
		return err == nil
	}
	// A one-hash SKU's counts of records, which HINCRBY moves, are decimal
	// digits only, as sku_fault reads them.
	count := func(i int) bool {
		s, ok := str(i)
		_, err := strconv.ParseUint(s, 10, 64)
		return ok && err == nil
	}
	bad := -1
	switch status, _ := str(2); {
	case !integer(0, false):
		bad = 0
	case !integer(1, false):
		bad = 1
	case status != "open" && status != "closed":
		bad = 2
	case !integer(4, false):
		bad = 4
	case !integer(5, true):
		bad = 5
	case !integer(6, true):
		bad = 6
	case values[7] != nil && layoutOf(values) != string(LayoutOneHash):
		bad = 7
	case values[7] != nil && !count(8):
		bad = 8
	case values[7] != nil && !count(9):
		bad = 9
	default:
		return ""
	}
	if s, ok := str(bad); ok {
		return fmt.Sprintf("%s is %q", liveFields[bad], s)
	}
	return liveFields[bad] + " is missing"
}

// buyerFault scans a SKU's buyers' counts for one that does not parse as
// an integer (batch.lua reads it with tonumber), and names the first.
func buyerFault(ctx context.Context, client redis.UniversalClient, records skuRecords) (string, error) {
	key := records.counts
	it := client.HScan(ctx, key, 0, matchPrefix(records.countPrefix), recordScanCount).Iterator()
	for it.Next(ctx) {
		user := strings.TrimPrefix(it.Val(), records.countPrefix)
		if !it.Next(ctx) {
			break
		}
		if _, err := strconv.ParseInt(it.Val(), 10, 64); err != nil {
			return fmt.Sprintf("the count of buyer %s is %q", user, it.Val()), nil
		}
	}
	if err := it.Err(); err != nil {
		return "", fmt.Errorf("look for malformed counts in %s: %w", key, err)
	}
	return "", nil
}

// Quarantine reads sku's state as the scripts read it: the types of its
// keys, its live fields, then its buyers' counts, stopping at the first
// fault. A SKU state that does not read is fenced (quarantine.lua) until
// its restore; refusal counters of another type are deleted, since they
// are console figures that expire anyway, and need no restore.
func (r *RedisReconcileSource) Quarantine(ctx context.Context, id domain.SKUID) (_ reconcile.StateFault, err error) {
	defer translateInto(&err)
	sku := id.String()
	fault, err := r.stateFault(ctx, sku)
	if err != nil || !fault.Found() {
		return fault, err
	}
	if fault.Key == r.keys.RefusalsKey(sku) {
		if err := r.client.Unlink(ctx, fault.Key).Err(); err != nil {
			return fault, fmt.Errorf("delete %s: %w", fault.Key, err)
		}
		return fault, nil
	}
	fault.Restore = true
	if err := quarantineScript.Run(ctx, r.client, []string{r.keys.SKUKey(sku)}).Err(); err != nil {
		return fault, fmt.Errorf("take sku %s out of sale for its restore: %w", sku, err)
	}
	return fault, nil
}

// stateFault is Quarantine's reading, without its writes.
func (r *RedisReconcileSource) stateFault(ctx context.Context, sku string) (reconcile.StateFault, error) {
	k, problem, ok, err := wrongTyped(ctx, r.client, r.keys.skuTypedKeys(sku))
	if err != nil || ok {
		return reconcile.StateFault{Key: k.key, Problem: problem}, err
	}
	values, err := r.client.HMGet(ctx, r.keys.SKUKey(sku), liveFields...).Result()
	if err != nil {
		return reconcile.StateFault{}, fmt.Errorf("read the live fields of %s: %w", sku, err)
	}
	if values[0] == nil && values[4] == nil {
		return reconcile.StateFault{}, nil // not warmed: nothing to read
	}
	if p := liveFault(values); p != "" {
		return reconcile.StateFault{Key: r.keys.SKUKey(sku), Problem: p}, nil
	}
	records := r.keys.recordsOf(sku, layoutOf(values))
	p, err := buyerFault(ctx, r.client, records)
	if err != nil || p == "" {
		return reconcile.StateFault{}, err
	}
	return reconcile.StateFault{Key: records.counts, Problem: p}, nil
}
