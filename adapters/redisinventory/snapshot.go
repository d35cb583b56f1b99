package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// LiveSKU is one SKU's Redis state within a PartitionSnapshot.
type LiveSKU struct {
	Present bool
	Stock   int64
	Seq     int64
	Status  string
	// Verified is true when the SKU's fence matches the Redis run serving it.
	Verified bool
	// Buyers is the number of users in the buyers hash.
	Buyers int64
	// Archived is true once archive-buyers moved the buyers key to SQL.
	Archived bool
}

// StreamEntry is one raw partition-stream entry.
type StreamEntry struct {
	ID     string
	Fields map[string]string
}

// PartitionSnapshot is what one partition holds at one instant: the live
// state of the SKUs asked for and every stream entry the projector's group
// has not acked yet (pending or undelivered).
type PartitionSnapshot struct {
	SKUs     map[string]LiveSKU
	InFlight []StreamEntry
}

// Snapshot reads the SKUs' states and the partition stream's unacked tail in
// one MULTI/EXEC, so the reconciler compares a state with exactly the events
// that explain it. All keys share the partition's hash tag, so the
// transaction is valid under Redis Cluster too. Entries below the group's
// lowest pending id are acked, and the projector acks only after its commit,
// so any event not in the snapshot's tail is in the ledger already.
func (r *RedisInventory) Snapshot(ctx context.Context, partition int, group string, skus []string) (PartitionSnapshot, error) {
	stream := r.keys.StreamKey(partition)
	from, err := r.unackedFrom(ctx, stream, group)
	if err != nil {
		return PartitionSnapshot{}, err
	}
	runID := ""
	if len(skus) > 0 {
		if runID, err = r.runID(ctx, r.keys.SKUKey(skus[0])); err != nil {
			return PartitionSnapshot{}, err
		}
	}
	var (
		states  = make([]*redis.SliceCmd, len(skus))
		buyers  = make([]*redis.IntCmd, len(skus))
		epoch   *redis.IntCmd
		entries *redis.XMessageSliceCmd
	)
	_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		epoch = p.LastSave(ctx)
		for i, sku := range skus {
			states[i] = p.HMGet(ctx, r.keys.SKUKey(sku), "stock", "seq", "status", "fence", "epoch", "archived_at")
			buyers[i] = p.HLen(ctx, r.keys.BuyersKey(sku))
		}
		entries = p.XRange(ctx, stream, from, "+")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return PartitionSnapshot{}, fmt.Errorf("snapshot of partition %d: %w", partition, err)
	}
	snap := PartitionSnapshot{SKUs: make(map[string]LiveSKU, len(skus))}
	lastSave := strconv.FormatInt(epoch.Val(), 10)
	for i, sku := range skus {
		v := states[i].Val()
		if len(v) != 6 || v[0] == nil {
			snap.SKUs[sku] = LiveSKU{}
			continue
		}
		str := func(i int) string { s, _ := v[i].(string); return s }
		live := LiveSKU{Present: true, Status: str(2), Buyers: buyers[i].Val(), Archived: str(5) != ""}
		live.Stock, _ = strconv.ParseInt(str(0), 10, 64)
		live.Seq, _ = strconv.ParseInt(str(1), 10, 64)
		live.Verified = str(3) == runID && str(4) == lastSave
		snap.SKUs[sku] = live
	}
	for _, m := range entries.Val() {
		fields := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			fields[k] = fmt.Sprint(v)
		}
		snap.InFlight = append(snap.InFlight, StreamEntry{ID: m.ID, Fields: fields})
	}
	return snap, nil
}

// unackedFrom returns the id from which the group has unacked entries: its
// lowest pending id, or the first id after the last delivered one. Without
// the group (a projector never started), the whole stream is unacked.
func (r *RedisInventory) unackedFrom(ctx context.Context, stream, group string) (string, error) {
	groups, err := r.client.XInfoGroups(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return "-", nil
		}
		return "", fmt.Errorf("groups of %s: %w", stream, err)
	}
	for _, g := range groups {
		if g.Name != group {
			continue
		}
		if g.Pending > 0 {
			p, err := r.client.XPending(ctx, stream, group).Result()
			if err != nil {
				return "", fmt.Errorf("pending of %s: %w", stream, err)
			}
			if p.Count > 0 {
				return p.Lower, nil
			}
		}
		// "(" makes the range exclusive: everything after the last delivered.
		return "(" + g.LastDeliveredID, nil
	}
	return "-", nil
}

// StreamEntries returns the entries of sku's partition stream that belong to
// sku and carry one of seqs, for re-projecting ledger gaps from the stream.
func (r *RedisInventory) StreamEntries(ctx context.Context, sku string, seqs map[int64]bool) ([]StreamEntry, error) {
	stream := r.keys.SKUStreamKey(sku)
	var out []StreamEntry
	from := "-"
	for {
		batch, err := r.client.XRangeN(ctx, stream, from, "+", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range batch {
			if m.Values["sku"] != sku {
				continue
			}
			seq, _ := strconv.ParseInt(fmt.Sprint(m.Values["seq"]), 10, 64)
			if !seqs[seq] {
				continue
			}
			fields := make(map[string]string, len(m.Values)+1)
			for k, v := range m.Values {
				fields[k] = fmt.Sprint(v)
			}
			out = append(out, StreamEntry{ID: m.ID, Fields: fields})
		}
		if len(batch) < 1000 {
			return out, nil
		}
		from = "(" + batch[len(batch)-1].ID
	}
}

// EntryExists tells whether the stream still holds the entry with id.
func (r *RedisInventory) EntryExists(ctx context.Context, stream, id string) (bool, error) {
	msgs, err := r.client.XRangeN(ctx, stream, id, id, 1).Result()
	if err != nil {
		return false, fmt.Errorf("look up %s in %s: %w", id, stream, err)
	}
	return len(msgs) == 1, nil
}
