package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections/streamentry"
)

// ReconcileSourceConfig configures a RedisReconcileSource.
type ReconcileSourceConfig struct {
	// Group is the projector's consumer group; its unacked entries are the
	// events in flight. Default streamentry.ConsumerGroup.
	Group string
	// ChunkSize is how many SKUs one MULTI reads at most, so one transaction
	// never holds Redis for long. Default 1000.
	ChunkSize int
	// TailLimit is how many unacked stream entries one MULTI reads at most
	// (XRANGE ... COUNT), so a backlog (PostgreSQL down, the projector
	// stopped) never holds Redis for long. It counts entries, which is what
	// XRANGE can bound: an entry of a batch.lua call holds up to
	// --max-batch events, so a tail of TailLimit entries may hold many more
	// events. The SKUs of a partition with a longer tail are reported
	// TailTruncated: lagging, too far behind to compare exactly. Default
	// 1000.
	TailLimit int
	// HoldsLimit is how many entries of a partition's expiry set (its open
	// holds) one MULTI reads at most. The SKUs of a partition with more
	// open holds are compared by their counts of open holds and held units
	// only, not by hold id. Default 10000.
	HoldsLimit int
}

func (c *ReconcileSourceConfig) setDefaults() {
	if c.Group == "" {
		c.Group = streamentry.ConsumerGroup
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = 1000
	}
	if c.TailLimit == 0 {
		c.TailLimit = 1000
	}
	if c.HoldsLimit == 0 {
		c.HoldsLimit = 10000
	}
}

// Validate reports every invalid setting at once.
func (c ReconcileSourceConfig) Validate() error {
	var errs []error
	if c.ChunkSize < 1 || c.TailLimit < 1 || c.HoldsLimit < 1 {
		errs = append(errs, errors.New("redis reconcile source: ChunkSize, TailLimit and HoldsLimit must be at least 1"))
	}
	return errors.Join(errs...)
}

// RedisReconcileSource is the live side the reconciler compares with the
// ledger: consistent snapshots of SKUs with their events in flight, the
// stream's events for re-projection, and compare-and-set repairs.
type RedisReconcileSource struct {
	client redis.UniversalClient
	keys   Keyspace
	cfg    ReconcileSourceConfig
}

var _ reconcile.Inventory = (*RedisReconcileSource)(nil)

// NewRedisReconcileSource returns the reconciler's view of client using
// keys' layout. A SKU counts as verified only under the run of the node
// serving it (node.lua).
func NewRedisReconcileSource(client redis.UniversalClient, keys Keyspace, cfg ReconcileSourceConfig) (*RedisReconcileSource, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RedisReconcileSource{client: client, keys: keys, cfg: cfg}, nil
}

// Snapshot reads the SKUs partition by partition, at most ChunkSize SKUs per
// MULTI/EXEC, each transaction holding the SKUs' states, the sizes of their
// buyers and requests hashes, and the partition stream's unacked tail (at
// most TailLimit entries) and the partition's expiry set (at most
// HoldsLimit entries: the open holds, which every hold script adds and
// removes together with the hold's record), so the reconciler compares a state with exactly the
// events that explain it. All keys of one transaction share the partition's
// hash tag, so it is valid under Redis Cluster too. Entries below the
// group's lowest pending id are acked, and the projector acks only after
// its commit, so any event not in the snapshot's tail is in the ledger
// already.
func (r *RedisReconcileSource) Snapshot(ctx context.Context, skus []domain.SKUID) (_ reconcile.Snapshot, err error) {
	defer translateInto(&err)
	byPartition := map[int][]domain.SKUID{}
	for _, sku := range skus {
		p := r.keys.Partition(sku.String())
		byPartition[p] = append(byPartition[p], sku)
	}
	snap := reconcile.Snapshot{SKUs: make(map[domain.SKUID]reconcile.LiveSKU, len(skus))}
	_, cluster := r.client.(*redis.ClusterClient)
	for p, list := range byPartition {
		for chunk := range slices.Chunk(list, r.cfg.ChunkSize) {
			err := r.snapshotChunk(ctx, p, chunk, &snap)
			// In a cluster, a master that is down hides only its own
			// partitions: the others are still compared.
			if err != nil && cluster && Unavailable(err) && ctx.Err() == nil {
				snap.Unreachable = append(snap.Unreachable, chunk...)
				continue
			}
			if err != nil {
				return reconcile.Snapshot{}, err
			}
		}
	}
	if len(snap.Unreachable) == len(skus) && len(skus) > 0 && len(snap.CorruptKeys) == 0 {
		return reconcile.Snapshot{}, fmt.Errorf("%w: no Redis Cluster master holding these SKUs answered", domain.ErrUnavailable)
	}
	return snap, nil
}

// snapshotChunk reads skus, all of partition, in one transaction into snap.
// A command's error is confined to what it reads: a key of another type,
// or live fields that do not read, make that SKU's LiveSKU.Corrupt; a
// partition key of another type (its stream, expiry set or retired set)
// goes to snap.CorruptKeys, and its SKUs, whose in-flight events cannot
// be read, to snap.Unreachable. Every other SKU is compared as usual.
func (r *RedisReconcileSource) snapshotChunk(ctx context.Context, partition int, skus []domain.SKUID, snap *reconcile.Snapshot) error {
	stream := r.keys.StreamKey(partition)
	from, err := r.unackedFrom(ctx, stream)
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		r.partitionUnreadable(partition, skus, stream, snap)
		return nil
	}
	if err != nil {
		return err
	}
	var (
		states   = make([]*redis.SliceCmd, len(skus))
		buyers   = make([]*redis.IntCmd, len(skus))
		receipts = make([]*redis.IntCmd, len(skus))
		refused  = make([]*redis.IntCmd, len(skus))
		retired  = make([]*redis.BoolCmd, len(skus))
		node     *redis.StringCmd
		entries  *redis.XMessageSliceCmd
		holds    *redis.StringSliceCmd
	)
	_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		node = p.Info(ctx, "replication")
		for i, sku := range skus {
			states[i] = p.HMGet(ctx, r.keys.SKUKey(sku.String()), append(liveFields, "archived_at")...)
			buyers[i] = p.HLen(ctx, r.keys.BuyersKey(sku.String()))
			receipts[i] = p.HLen(ctx, r.keys.RequestsKey(sku.String()))
			refused[i] = p.HLen(ctx, r.keys.RefusalsKey(sku.String()))
			retired[i] = p.SIsMember(ctx, r.keys.TombstoneKey(partition), sku.String())
		}
		// One entry beyond the limit tells a tail that is longer.
		entries = p.XRangeN(ctx, stream, from, "+", int64(r.cfg.TailLimit)+1)
		holds = p.ZRange(ctx, r.keys.ExpiryKey(partition), 0, int64(r.cfg.HoldsLimit))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("snapshot of partition %d: %w", partition, err)
	}
	for _, c := range []struct {
		key string
		err error
	}{{stream, entries.Err()}, {r.keys.ExpiryKey(partition), holds.Err()}, {r.keys.TombstoneKey(partition), firstErr(retired)}} {
		if redis.HasErrorPrefix(c.err, "WRONGTYPE") {
			r.partitionUnreadable(partition, skus, c.key, snap)
			return nil
		}
	}
	run := parseReplID(node.Val())
	truncated := len(entries.Val()) > r.cfg.TailLimit
	open, openRead := openHoldsBySKU(holds.Val(), r.cfg.HoldsLimit)
	for i, sku := range skus {
		if err := states[i].Err(); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return fmt.Errorf("snapshot of %s: %w", sku, err)
		}
		if fault := r.skuFault(sku.String(), states[i], buyers[i], receipts[i], refused[i]); fault != nil {
			snap.SKUs[sku] = reconcile.LiveSKU{Present: true, Corrupt: fault, TailTruncated: truncated}
			continue
		}
		v := states[i].Val()
		if v[0] == nil && v[4] == nil {
			snap.SKUs[sku] = reconcile.LiveSKU{Retired: retired[i].Val(), TailTruncated: truncated}
			continue
		}
		rp := newReply("snapshot of "+sku.String(), v)
		live := reconcile.LiveSKU{Present: true, Buyers: buyers[i].Val(), Receipts: receipts[i].Val(), TailTruncated: truncated}
		if layoutOf(v) != "" {
			// A one-hash SKU counts its records in its hash (records.lua):
			// its buyers and requests hashes, read all the same, are empty.
			live.Receipts, live.Buyers = rp.Decimal(8, "receipts"), rp.Decimal(9, "buyers")
		}
		live.Stock = rp.Decimal(0, "stock")
		live.Status = rp.OptString(2, "status")
		live.Verified = run != "" && rp.OptString(3, "fence") == run
		live.Seq = rp.Decimal(4, "seq")
		live.Held = optDecimal(rp, 5, "held")
		live.OpenHolds = optDecimal(rp, 6, "holds")
		live.Archived = rp.OptString(len(liveFields), "archived_at") != ""
		live.OpenHoldIDs, live.HoldIDsRead = open[sku.String()], openRead
		if err := rp.Err(); err != nil {
			return err
		}
		snap.SKUs[sku] = live
	}
	if truncated {
		return nil // an incomplete tail explains nothing exactly
	}
	for _, m := range entries.Val() {
		for _, e := range streamEvents(m) {
			if id, err := domain.NewSKUID(e.SKU); err == nil && slices.Contains(skus, id) {
				snap.InFlight = append(snap.InFlight, e)
			}
		}
	}
	return nil
}

// skuFault is the fault of one SKU's reads in a snapshot: a key of another
// type, or live fields that do not read (liveFault); nil when they read.
func (r *RedisReconcileSource) skuFault(sku string, state *redis.SliceCmd, counts ...*redis.IntCmd) *reconcile.StateFault {
	keys := r.keys.skuTypedKeys(sku)
	errs := []error{state.Err()}
	for _, c := range counts {
		errs = append(errs, c.Err())
	}
	for i, err := range errs {
		if redis.HasErrorPrefix(err, "WRONGTYPE") {
			return &reconcile.StateFault{Key: keys[i].key, Problem: "not a " + keys[i].want}
		}
	}
	v := state.Val()
	if v[0] == nil && v[4] == nil {
		return nil
	}
	if p := liveFault(v); p != "" {
		return &reconcile.StateFault{Key: keys[0].key, Problem: p}
	}
	return nil
}

// partitionUnreadable records that key, of partition, holds another type:
// the partition's SKUs are not compared (their in-flight events, expiry
// entries or tombstones cannot be read), and the key is reported.
func (r *RedisReconcileSource) partitionUnreadable(partition int, skus []domain.SKUID, key string, snap *reconcile.Snapshot) {
	snap.Unreachable = append(snap.Unreachable, skus...)
	for _, c := range snap.CorruptKeys {
		if c.Key == key {
			return
		}
	}
	want := ""
	for _, k := range r.keys.partitionTypedKeys(partition) {
		if k.key == key {
			want = k.want
		}
	}
	snap.CorruptKeys = append(snap.CorruptKeys, ledger.CorruptRecord{Kind: ledger.RecordPartitionKey, Key: key, Problem: "not a " + want})
}

// firstErr is the first error among cmds.
func firstErr(cmds []*redis.BoolCmd) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// streamEvents returns the events of entry m that decode. The others, and
// an entry that does not split into events, are left out: the projector
// sends them to dead_letters, which alerts.
func streamEvents(m redis.XMessage) []domain.Event {
	entry, err := streamentry.ParseEntryEvents(streamentry.MessageFields(m))
	if err != nil {
		return nil
	}
	events := make([]domain.Event, 0, len(entry))
	for _, ee := range entry {
		if ee.Err == nil {
			events = append(events, ee.Event)
		}
	}
	return events
}

// openHoldsBySKU groups the entries of an expiry set ("<sku> <hold_id>",
// hold.lua) by SKU. read is false when the set had more than limit entries.
func openHoldsBySKU(members []string, limit int) (bySKU map[string][]string, read bool) {
	if len(members) > limit {
		return nil, false
	}
	bySKU = map[string][]string{}
	for _, m := range members {
		if sku, id, ok := strings.Cut(m, " "); ok {
			bySKU[sku] = append(bySKU[sku], id)
		}
	}
	return bySKU, true
}

// optDecimal reads a counter field that is absent until its first use.
func optDecimal(rp *reply, i int, field string) int64 {
	if rp.OptString(i, field) == "" {
		return 0
	}
	return rp.Decimal(i, field)
}

// unackedFrom returns the id from which the group has unacked entries: its
// lowest pending id, or the first id after the last delivered one. Without
// the group (a projector never started), the whole stream is unacked.
func (r *RedisReconcileSource) unackedFrom(ctx context.Context, stream string) (string, error) {
	groups, err := r.client.XInfoGroups(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return "-", nil
		}
		return "", fmt.Errorf("groups of %s: %w", stream, err)
	}
	for _, g := range groups {
		if g.Name != r.cfg.Group {
			continue
		}
		if g.Pending > 0 {
			p, err := r.client.XPending(ctx, stream, r.cfg.Group).Result()
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

// StreamEvents returns the events of sku that its partition stream still
// holds with one of seqs, for re-projecting ledger gaps, reading the stream
// 1000 entries at a time, whatever number of events they hold. Events that
// cannot be decoded are left out: they are dead letters, not events; their
// siblings in an entry are not.
func (r *RedisReconcileSource) StreamEvents(ctx context.Context, sku domain.SKUID, seqs []int64) (_ []domain.Event, err error) {
	defer translateInto(&err)
	want := make(map[int64]bool, len(seqs))
	for _, s := range seqs {
		want[s] = true
	}
	stream := r.keys.SKUStreamKey(sku.String())
	var out []domain.Event
	from := "-"
	for {
		batch, err := r.client.XRangeN(ctx, stream, from, "+", 1000).Result()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range batch {
			for _, e := range streamEvents(m) {
				if e.SKU == sku.String() && want[e.Seq] {
					out = append(out, e)
				}
			}
		}
		if len(batch) < 1000 {
			return out, nil
		}
		from = "(" + batch[len(batch)-1].ID
	}
}

// StampMany marks SKUs as verified under the current Redis run, each provided
// its seq is still seqs[i]; stamped[i] is false when a purchase moved it since
// the check. One pipeline for all: after a restart every SKU needs its
// stamp, and a round trip (and fsync) per SKU would keep sales closed for seconds.
func (r *RedisReconcileSource) StampMany(ctx context.Context, skus []domain.SKUID, seqs []int64) (stamped []bool, err error) {
	defer translateInto(&err)
	if err := stampScript.Load(ctx, r.client).Err(); err != nil {
		return nil, fmt.Errorf("load stamp script: %w", err)
	}
	cmds := make([]*redis.Cmd, len(skus))
	_, err = r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = stampScript.EvalSha(ctx, p, []string{r.keys.SKUKey(sku.String())}, seqs[i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stamp %d skus: %w", len(skus), err)
	}
	stamped = make([]bool, len(skus))
	for i, c := range cmds {
		if stamped[i], err = casOutcome("stamp "+skus[i].String(), skus[i], c); err != nil {
			return nil, err
		}
	}
	return stamped, nil
}

// Fence takes the SKU out of sale (purchases get recovering) if its seq is
// still seq. fenced is false when a purchase moved the seq meanwhile.
func (r *RedisReconcileSource) Fence(ctx context.Context, sku domain.SKUID, seq int64) (fenced bool, err error) {
	defer translateInto(&err)
	return r.casScript(ctx, fenceScript, "fence", sku, seq)
}

// Correct sets the SKU's stock and stamps it verified if its seq is still
// seq. corrected is false when a purchase moved the seq meanwhile.
func (r *RedisReconcileSource) Correct(ctx context.Context, sku domain.SKUID, seq, stock int64) (corrected bool, err error) {
	defer translateInto(&err)
	return r.casScript(ctx, correctScript, "correct", sku, seq, stock)
}

func (r *RedisReconcileSource) casScript(ctx context.Context, s *luaScript, name string, sku domain.SKUID, seq int64, args ...any) (bool, error) {
	return casOutcome(name+" "+sku.String(), sku, s.Run(ctx, r.client, []string{r.keys.SKUKey(sku.String())}, append([]any{seq}, args...)...))
}

// casOutcome reads the answer of a compare-and-set script (stamp, fence,
// correct): done is false when the seq moved or a restore owns the SKU.
func casOutcome(op string, sku domain.SKUID, c *redis.Cmd) (done bool, err error) {
	n, err := c.Int64()
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	switch code := replyCode(n); code {
	case codeDone:
		return true, nil
	case codeSeqMoved:
		return false, nil
	default:
		return false, refusal(newReply(op, []any{n}), code, subject{sku: sku.String()})
	}
}
