package redisinventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/observe/tracing"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// DefaultTimeout is InventoryConfig.Timeout's default.
const DefaultTimeout = 2 * time.Second

// InventoryConfig configures a RedisInventory.
type InventoryConfig struct {
	// Timeout bounds every call of the purchase path (warm, deduct,
	// release, adjust, state), connection wait included. It must stay well
	// below the HTTP server's WriteTimeout, so a stalled Redis is answered
	// with unavailable instead of a dropped connection; the client must
	// have ContextTimeoutEnabled for a deadline to cut a blocked read.
	// Default DefaultTimeout.
	Timeout time.Duration
	// MaxBatch is the most purchase attempts (deducts and reserves) of the
	// SKUs of one partition sent in one script call; 1 sends each alone.
	// Default DefaultMaxBatch.
	MaxBatch int
	// BatchesInFlight bounds the purchase script calls in flight, 1 to
	// MaxBatchesInFlight: a partition with attempts waiting always has one,
	// and it may have up to BatchesInFlight while a quarter of MaxBatch of
	// its attempts wait and the inventory has fewer than BatchesInFlight in
	// flight in all. Default
	// DefaultBatchesInFlight.
	BatchesInFlight int
	// StreamEntries is how a purchase call writes its events: one stream
	// entry per call (EntriesPerCall, the default) or one per event
	// (EntriesPerEvent, the format of 1.0.0, while a 1.0.0 process still
	// reads the streams).
	StreamEntries streamentry.StreamEntries
	// ObserveBatch, if set, is told the size of every purchase batch sent.
	// It runs on the purchase path and must not block.
	ObserveBatch func(size int)
	// ObserveBatchesInFlight, if set, is told +1 when a purchase script
	// call leaves and -1 when it returns. It runs on the purchase path and
	// must not block.
	ObserveBatchesInFlight func(delta int)
	// Corrupt, if set, hears of every receipt or hold record a call met
	// that does not parse; the call itself answers a
	// *ledger.CorruptRecordError, which matches domain.ErrUnavailable.
	Corrupt CorruptRecordReporter
}

func (c *InventoryConfig) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.BatchesInFlight == 0 {
		c.BatchesInFlight = DefaultBatchesInFlight
	}
	if c.StreamEntries == "" {
		c.StreamEntries = streamentry.EntriesPerCall
	}
}

// Validate reports every invalid setting at once.
func (c InventoryConfig) Validate() error {
	var errs []error
	if c.Timeout < 0 {
		errs = append(errs, errors.New("redis inventory: Timeout must not be negative"))
	}
	if c.MaxBatch < 1 || c.MaxBatch > MaxBatchLimit {
		errs = append(errs, fmt.Errorf("redis inventory: MaxBatch must be between 1 and %d, not %d", MaxBatchLimit, c.MaxBatch))
	}
	if c.BatchesInFlight < 1 || c.BatchesInFlight > MaxBatchesInFlight {
		errs = append(errs, fmt.Errorf("redis inventory: BatchesInFlight must be between 1 and %d, not %d", MaxBatchesInFlight, c.BatchesInFlight))
	}
	if err := c.StreamEntries.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("redis inventory: StreamEntries: %w", err))
	}
	return errors.Join(errs...)
}

// tracer names the purchase script spans.
var tracer = otel.Tracer("github.com/invledger/invledger/adapters/internal/redis/redisinventory")

// RedisInventory runs the purchase scripts. Its client must not be shared
// with Watermill, whose subscriber closes the client it was given.
type RedisInventory struct {
	client redis.UniversalClient
	// batches sends deducts and reserves, one batch.lua call per batch of
	// concurrent attempts on the SKUs of one partition.
	batches *batcher
	// script is batch.lua; a test swaps in a broken copy to show that the
	// differential test catches it.
	script *luaScript
	keys   Keyspace
	cfg    InventoryConfig
	// stopped, when set, is why sales are stopped: the writing calls
	// return it without touching Redis. One atomic load per call.
	stopped atomic.Pointer[error]
}

var (
	_ ledger.Inventory       = (*RedisInventory)(nil)
	_ ledger.StockAdjuster   = (*RedisInventory)(nil)
	_ ledger.InventoryStates = (*RedisInventory)(nil)
)

// NewRedisInventory returns an inventory over client using keys' layout.
func NewRedisInventory(client redis.UniversalClient, keys Keyspace, cfg InventoryConfig) (*RedisInventory, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &RedisInventory{client: client, keys: keys, cfg: cfg, script: batchScript}
	r.batches = newBatcher(func(ctx context.Context, keys []string, args []any) ([]any, error) {
		v, err := r.script.Run(ctx, client, keys, args...).Slice()
		if err != nil {
			return nil, r.failed(ctx, "batch.lua", err)
		}
		return v, nil
	}, batcherConfig{keys: keys, entries: cfg.StreamEntries, max: cfg.MaxBatch, inFlight: cfg.BatchesInFlight,
		timeout: cfg.Timeout, observe: cfg.ObserveBatch, calls: cfg.ObserveBatchesInFlight})
	return r, nil
}

// StopSales makes every call that changes stock (warm, deduct, release,
// adjust, reserve, hold ends, order records) fail with reason, which should
// wrap domain.ErrUnsafeRedis, until ResumeSales: nothing may be sold on a
// Redis that could lose it. State still answers.
func (r *RedisInventory) StopSales(reason error) { r.stopped.Store(&reason) }

// ResumeSales undoes StopSales.
func (r *RedisInventory) ResumeSales() { r.stopped.Store(nil) }

// begin starts one purchase-path call: it refuses while sales are stopped
// (writes only) and bounds the call by the configured timeout.
func (r *RedisInventory) begin(ctx context.Context, writes bool) (context.Context, context.CancelFunc, error) {
	if writes {
		if reason := r.stopped.Load(); reason != nil {
			return ctx, noCancel, *reason
		}
	}
	// A caller's deadline within the timeout bounds the call already; a
	// context of its own would cost every purchase a timer and a
	// registration with the caller's context, 8% of the library's CPU at
	// 1,000 concurrent buyers sharing one parent context.
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= r.cfg.Timeout {
		return ctx, noCancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	return ctx, cancel, nil
}

func noCancel() {}

// failed wraps the error of a Redis call made under ctx. A call cut by the
// deadline, or a Redis that cannot be reached, is domain.ErrUnavailable: the
// script may or may not have run, so the caller retries with the same
// request id, which replays its receipt.
func (r *RedisInventory) failed(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && !errors.Is(err, domain.ErrUnavailable) {
		return fmt.Errorf("%s: %w: redis did not answer within %s (%w): %w", op, domain.ErrUnavailable, r.cfg.Timeout, ctx.Err(), err)
	}
	return fmt.Errorf("%s: %w", op, translate(err))
}

// Load preloads every script of the table (scripts.go), so the first
// purchases, holds and repairs do not pay for EVAL. In a
// cluster, a master that cannot be reached is skipped: preloading only
// saves time, since a script missing on a node is sent whole on its first
// call (EVALSHA falls back to EVAL). unreachable lists what was skipped.
func (r *RedisInventory) Load(ctx context.Context) (unreachable []string, err error) {
	defer translateInto(&err)
	load := func(ctx context.Context, node redis.Scripter) error {
		for _, s := range scripts {
			if err := s.Load(ctx, node).Err(); err != nil {
				return fmt.Errorf("load redis script %s: %w", s.file, err)
			}
		}
		return nil
	}
	cluster, ok := r.client.(*redis.ClusterClient)
	if !ok {
		return nil, load(ctx, r.client)
	}
	var mu sync.Mutex
	err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		err := load(ctx, node)
		if err != nil && Unavailable(err) {
			mu.Lock()
			unreachable = append(unreachable, node.Options().Addr)
			mu.Unlock()
			return nil
		}
		return err
	})
	return unreachable, err
}

// Warm loads def into Redis with its stocked event, identified by eventID.
// stocked is false when the SKU was already live: then nothing changed and the
// returned state is the live one.
func (r *RedisInventory) Warm(ctx context.Context, def domain.SKUDefinition, eventID string) (state domain.StockState, stocked bool, err error) {
	sku := def.SKU().String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.StockState{}, false, err
	}
	v, err := warmScript.Run(ctx, r.client,
		[]string{r.keys.SKUKey(sku), r.keys.SKUStreamKey(sku)},
		sku, def.InitialStock(), def.PerUserLimit(), eventID, r.keys.Layout().field(),
	).Slice()
	if err != nil {
		return domain.StockState{}, false, r.failed(ctx, "warm "+sku, err)
	}
	rp := newReply("warm "+sku, v)
	code, err := rp.outcome(subject{sku: sku})
	if err != nil {
		return domain.StockState{}, false, err
	}
	state = domain.StockState{SKU: sku, Limit: def.PerUserLimit()}
	state.Stock = rp.Int(1, "stock")
	state.Seq = rp.Int(2, "seq")
	state.Status = domain.SKUStatus(rp.String(3, "status"))
	if err := rp.Err(); err != nil {
		return domain.StockState{}, false, err
	}
	return state, code == codeDone, nil
}

// Deduct runs one purchase attempt, in a batch with the attempts on the
// SKUs of the same partition that wait beside it (batcher). A replay of an earlier request id
// returns that request's original receipt. Refusals are domain sentinel
// errors (ErrSoldOut, ErrAlreadyPurchased, ErrNotWarmed, ErrClosed,
// ErrConflict, or a qty FieldError) and write nothing.
func (r *RedisInventory) Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	s := sku.String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.Receipt{}, err
	}
	// Only a sampled request pays for tracing: a span of the script call,
	// whose traceparent the entry carries to the projector.
	traceParent := ""
	if trace.SpanContextFromContext(ctx).IsSampled() {
		var span trace.Span
		ctx, span = tracer.Start(ctx, "batch.lua", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("invledger.sku", s), attribute.String("db.system.name", "redis")))
		defer span.End()
		traceParent = tracing.TraceParent(ctx)
	}
	v, err := r.batches.do(ctx, s, "d", user.String(), qty.Int64(), req.String(), eventID, traceParent)
	if err != nil {
		trace.SpanFromContext(ctx).SetStatus(codes.Error, "script failed")
		return domain.Receipt{}, r.corrupt(ctx, fmt.Errorf("deduct %s request_id %q: %w", s, req.String(), err), ledger.CorruptRecord{SKU: s})
	}
	rp := &reply{what: "deduct", of: s, v: v}
	code, err := rp.outcome(subject{sku: s, req: req})
	if err != nil {
		return domain.Receipt{}, r.corrupt(ctx, err, ledger.CorruptRecord{SKU: s, RequestID: req.String()})
	}
	rc := domain.Receipt{SKU: s, Qty: qty.Int64(), User: user.String(), RequestID: req.String()}
	rc.EventID = rp.String(1, "event_id")
	rc.Seq = rp.Int(2, "seq")
	rc.Remaining = rp.Int(3, "remaining")
	if code == codeDoneBefore {
		rc.Replayed = true
		rc.Released = rp.Int(4, "released") == 1
	}
	if err := rp.Err(); err != nil {
		return domain.Receipt{}, err
	}
	return rc, nil
}

// Release returns the units of the deduction made by req to stock, exactly
// once. Unknown deductions are ErrNotFound; a deduction of another user is ErrConflict.
// The release of a confirmed hold's sale carries the hold's id and order id.
func (r *RedisInventory) Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error) {
	s := sku.String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	op := fmt.Sprintf("release %s request_id %q", s, req.String())
	keys := []string{r.keys.SKUKey(s), r.keys.BuyersKey(s), r.keys.RequestsKey(s), r.keys.SKUStreamKey(s)}
	holdID := domain.HoldIDFor(sku, req).String()
	v, err := releaseScript.Run(ctx, r.client, keys, s, user.String(), req.String(), eventID, reason.String(), holdID).Slice()
	if err != nil {
		return domain.ReleaseReceipt{}, r.corrupt(ctx, r.failed(ctx, op, err), ledger.CorruptRecord{SKU: s, RequestID: req.String(), HoldID: holdID})
	}
	rp := newReply("release "+s, v)
	code, err := rp.outcome(subject{sku: s, req: req})
	if err != nil {
		return domain.ReleaseReceipt{}, r.corrupt(ctx, err, ledger.CorruptRecord{SKU: s, RequestID: req.String()})
	}
	res := domain.ReleaseReceipt{SKU: s, RequestID: req.String(), AlreadyReleased: code == codeDoneBefore}
	res.EventID = rp.String(1, "event_id")
	res.Seq = rp.Int(2, "seq")
	if err := rp.Err(); err != nil {
		return domain.ReleaseReceipt{}, err
	}
	return res, nil
}

// Adjust applies an approved adjustment to the SKU's stock and appends its
// adjusted event, once per adjustment id: a retry returns the original
// outcome. A change that would take stock below zero is
// domain.ErrInsufficientStock and writes nothing.
func (r *RedisInventory) Adjust(ctx context.Context, sku domain.SKUID, adjustmentID, delta int64, eventID, actor, reason string) (domain.Receipt, error) {
	s := sku.String()
	ctx, cancel, err := r.begin(ctx, true)
	defer cancel()
	if err != nil {
		return domain.Receipt{}, err
	}
	keys := []string{r.keys.SKUKey(s), r.keys.SKUStreamKey(s)}
	v, err := adjustScript.Run(ctx, r.client, keys, s, delta, eventID, actor, reason, adjustmentID).Slice()
	if err != nil {
		return domain.Receipt{}, r.corrupt(ctx, r.failed(ctx, "adjust "+s, err), ledger.CorruptRecord{SKU: s})
	}
	rp := newReply("adjust "+s, v)
	_, err = rp.outcome(subject{sku: s})
	if err != nil {
		return domain.Receipt{}, r.corrupt(ctx, err, ledger.CorruptRecord{SKU: s})
	}
	rc := domain.Receipt{SKU: s, Qty: delta}
	rc.EventID = rp.String(1, "event_id")
	rc.Seq = rp.Int(2, "seq")
	rc.Remaining = rp.Int(3, "stock")
	if err := rp.Err(); err != nil {
		return domain.Receipt{}, err
	}
	return rc, nil
}

// Applied reads the marker adjust.lua leaves on the SKU hash when it
// applies adjustment adjustmentID: its receipt, and true, if it was applied.
// A SKU not in Redis has no markers.
func (r *RedisInventory) Applied(ctx context.Context, sku domain.SKUID, adjustmentID int64) (_ domain.Receipt, _ bool, err error) {
	defer translateInto(&err)
	s := sku.String()
	raw, err := r.client.HGet(ctx, r.keys.SKUKey(s), "adjustment:"+strconv.FormatInt(adjustmentID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return domain.Receipt{}, false, nil
	}
	if err != nil {
		return domain.Receipt{}, false, fmt.Errorf("read adjustment %d of %s: %w", adjustmentID, s, err)
	}
	var done struct {
		EventID string  `json:"event_id"`
		Seq     float64 `json:"seq"`
		Stock   float64 `json:"stock"`
	}
	if err := json.Unmarshal([]byte(raw), &done); err != nil {
		return domain.Receipt{}, false, fmt.Errorf("read adjustment %d of %s: %w: %w", adjustmentID, s, ErrScript, err)
	}
	return domain.Receipt{SKU: s, EventID: done.EventID, Seq: int64(done.Seq), Remaining: int64(done.Stock)}, true, nil
}

// State reads a SKU's live inventory in one round trip. A SKU that is not in
// Redis is ErrNotWarmed.
func (r *RedisInventory) State(ctx context.Context, sku domain.SKUID) (domain.StockState, error) {
	s := sku.String()
	ctx, cancel, _ := r.begin(ctx, false)
	defer cancel()
	key := r.keys.SKUKey(s)
	v, err := stateScript.Run(ctx, r.client, []string{key}).Slice()
	if err != nil {
		return domain.StockState{}, r.corrupt(ctx, r.failed(ctx, "state "+s, err), ledger.CorruptRecord{SKU: s})
	}
	if len(v) == 0 {
		return domain.StockState{}, domain.ErrNotWarmed
	}
	return parseState(s, v)
}

// Retired tells whether the SKU is in its partition's tombstone set: one
// SISMEMBER, asked only after a script answered not warmed.
func (r *RedisInventory) Retired(ctx context.Context, sku domain.SKUID) (bool, error) {
	ctx, cancel, _ := r.begin(ctx, false)
	defer cancel()
	s := sku.String()
	ok, err := r.client.SIsMember(ctx, r.keys.SKUTombstoneKey(s), s).Result()
	if err != nil {
		return false, r.failed(ctx, "tombstone of "+s, err)
	}
	return ok, nil
}

// States reads the live inventory of skus with state.lua in one pipeline:
// one round trip per Redis node. SKUs not in Redis are absent from the
// map. A Redis that lost the script is given it once, and asked again.
func (r *RedisInventory) States(ctx context.Context, skus []domain.SKUID) (_ map[domain.SKUID]domain.StockState, err error) {
	defer translateInto(&err)
	cmds := make([]*redis.Cmd, len(skus))
	run := func() error {
		pipe := r.client.Pipeline()
		for i, sku := range skus {
			cmds[i] = stateScript.EvalSha(ctx, pipe, []string{r.keys.SKUKey(sku.String())})
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err = run()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = stateScript.Load(ctx, r.client).Err(); err == nil {
			err = run()
		}
	}
	if err != nil && !isCorrupt(err) {
		return nil, fmt.Errorf("states of %d skus: %w", len(skus), err)
	}
	states := make(map[domain.SKUID]domain.StockState, len(skus))
	for i, sku := range skus {
		v, err := cmds[i].Slice()
		if err != nil && isCorrupt(err) {
			// One SKU that does not read leaves the page readable; a
			// call on the SKU itself reports it for its restore.
			states[sku] = domain.StockState{SKU: sku.String(), Corrupt: true}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("state %s: %w", sku, err)
		}
		if len(v) == 0 {
			continue
		}
		if states[sku], err = parseState(sku.String(), v); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// parseState decodes state.lua's reply for a warmed SKU.
func parseState(sku string, v []any) (domain.StockState, error) {
	rp := newReply("state "+sku, v)
	st := domain.StockState{SKU: sku}
	st.Stock = rp.Int(0, "stock")
	st.Seq = rp.Int(1, "seq")
	st.Limit = rp.Int(2, "limit")
	st.Status = domain.SKUStatus(rp.String(3, "status"))
	st.Verified = rp.Int(4, "verified") == 1
	st.Held = rp.Int(5, "held")
	if err := rp.Err(); err != nil {
		return domain.StockState{}, err
	}
	return st, nil
}
