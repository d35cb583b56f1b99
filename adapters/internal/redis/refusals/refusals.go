// Package refusals counts refused purchases per SKU and reason, across
// every serve process behind a balancer, for the console's SKU page.
//
// Refusals are not events: the purchase script refuses without writing.
// So each process counts them in memory (Counter, a mutex and a map, on
// the purchase path) and a Flusher adds the counts to a small Redis hash
// per SKU once a second (HINCRBY, one pipeline, off the request path) in
// the SKU's partition slot, which Read returns. Flushing is best effort: a
// Redis outage drops the counts of that second and is logged once, and a
// purchase never waits for it. Memory is bounded: the counter holds only
// the SKUs refused since the last flush, at most MaxSKUs of them.
package refusals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// DefaultMaxSKUs bounds the SKUs one counter tracks between two flushes.
const DefaultMaxSKUs = 10_000

// Counter is one process's refused purchases since the last flush, by SKU
// and reason. It is safe for concurrent use.
type Counter struct {
	maxSKUs int

	mu      sync.Mutex
	counts  map[string]map[string]int64
	dropped int64 // refusals of SKUs past maxSKUs, since the last flush
}

// NewCounter returns a counter of at most maxSKUs SKUs between flushes
// (DefaultMaxSKUs when maxSKUs < 1).
func NewCounter(maxSKUs int) *Counter {
	if maxSKUs < 1 {
		maxSKUs = DefaultMaxSKUs
	}
	return &Counter{maxSKUs: maxSKUs, counts: map[string]map[string]int64{}}
}

// Add counts one refusal of sku for reason. A SKU beyond the cap is not
// counted (the flusher logs how many were dropped).
func (c *Counter) Add(sku, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.counts[sku]
	if m == nil {
		if len(c.counts) >= c.maxSKUs {
			c.dropped++
			return
		}
		m = map[string]int64{}
		c.counts[sku] = m
	}
	m[reason]++
}

// take hands over the counts so far and starts afresh.
func (c *Counter) take() (counts map[string]map[string]int64, dropped int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts, dropped = c.counts, c.dropped
	c.counts, c.dropped = make(map[string]map[string]int64, len(counts)), 0
	return counts, dropped
}

// Wrap returns inv with every refused Deduct counted: the refusals a rule
// gave (sold out, over the limit, paused...), by their domain.Code, not
// failures of Redis itself.
func (c *Counter) Wrap(inv ledger.Inventory) ledger.Inventory {
	return &countedInventory{Inventory: inv, c: c}
}

type countedInventory struct {
	ledger.Inventory
	c *Counter
}

func (ci *countedInventory) Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	rc, err := ci.Inventory.Deduct(ctx, sku, user, qty, req, eventID)
	ci.c.addRefusal(sku, err)
	return rc, err
}

// WrapOrders returns inv with every refused Reserve counted as Wrap counts
// a refused Deduct: in a sale that holds before it sells, the reserve is
// the buyer's click. Orders reserve their lines through it too.
func (c *Counter) WrapOrders(inv ledger.OrderInventory) ledger.OrderInventory {
	return &countedReserves{OrderInventory: inv, c: c}
}

type countedReserves struct {
	ledger.OrderInventory
	c *Counter
}

func (cr *countedReserves) Reserve(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID,
	ttl domain.HoldTTL, orderID string, eventID string) (domain.Hold, error) {
	h, err := cr.OrderInventory.Reserve(ctx, sku, user, qty, req, ttl, orderID, eventID)
	cr.c.addRefusal(sku, err)
	return h, err
}

// addRefusal counts err against sku when a rule gave it; a failure of
// Redis itself, or no error, counts nothing.
func (c *Counter) addRefusal(sku domain.SKUID, err error) {
	if err == nil {
		return
	}
	if o := ledger.Outcome(err); o != "error" {
		c.Add(sku.String(), o)
	}
}

// FlusherConfig configures a Flusher. Counter and Client are required.
type FlusherConfig struct {
	Counter *Counter
	// Client should be the flusher's own small client, so a flush never
	// takes a connection the purchase path waits for.
	Client redis.UniversalClient
	Keys   redisinventory.Keyspace
	// Interval between flushes. Default 1s.
	Interval time.Duration
	// TTL of a SKU's hash, renewed by each flush that adds to it: a sale's
	// refusals are forgotten this long after its last one. Default 24h.
	TTL    time.Duration
	Logger *slog.Logger
}

func (c *FlusherConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.TTL == 0 {
		c.TTL = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem at once.
func (c FlusherConfig) Validate() error {
	var errs []error
	if c.Counter == nil {
		errs = append(errs, errors.New("refusals: FlusherConfig.Counter is required"))
	}
	if c.Client == nil {
		errs = append(errs, errors.New("refusals: FlusherConfig.Client is required"))
	}
	if c.Interval < 0 || c.TTL < 0 {
		errs = append(errs, errors.New("refusals: Interval and TTL must not be negative"))
	}
	return errors.Join(errs...)
}

// Flusher adds a Counter's counts to Redis once per Interval.
type Flusher struct {
	cfg     FlusherConfig
	failing bool // the last flush failed and was logged
}

// NewFlusher returns a flusher; Run starts it.
func NewFlusher(cfg FlusherConfig) (*Flusher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Flusher{cfg: cfg}, nil
}

// Run flushes every Interval until ctx ends, then once more, so a serve
// that stops loses at most what Redis does not take within a second. It
// returns nil: a failed flush drops its counts and is logged once until
// one succeeds again.
func (f *Flusher) Run(ctx context.Context) error {
	t := time.NewTicker(f.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			f.flushLogged(last)
			cancel()
			return nil
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, f.cfg.Interval)
			f.flushLogged(fctx)
			cancel()
		}
	}
}

func (f *Flusher) flushLogged(ctx context.Context) {
	err := f.flush(ctx)
	switch {
	case err != nil && !f.failing:
		f.failing = true
		f.cfg.Logger.Warn("refusals: counts not added to Redis and dropped; the console undercounts refusals until Redis answers again", "err", err)
	case err == nil && f.failing:
		f.failing = false
		f.cfg.Logger.Info("refusals: counts reach Redis again")
	}
}

// flush adds the counts taken from the counter to each SKU's hash, in one
// pipeline, and renews the hashes' TTL.
func (f *Flusher) flush(ctx context.Context) error {
	counts, dropped := f.cfg.Counter.take()
	if dropped > 0 {
		f.cfg.Logger.Warn("refusals: more SKUs refused in one interval than are tracked; some refusals not counted",
			"max_skus", f.cfg.Counter.maxSKUs, "dropped", dropped)
	}
	if len(counts) == 0 {
		return nil
	}
	pipe := f.cfg.Client.Pipeline()
	for sku, reasons := range counts {
		key := f.cfg.Keys.RefusalsKey(sku)
		for reason, n := range reasons {
			pipe.HIncrBy(ctx, key, reason, n)
		}
		pipe.Expire(ctx, key, f.cfg.TTL)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Read returns sku's refused purchases by reason, as every process has
// flushed them; empty when there were none (or they expired).
func Read(ctx context.Context, client redis.UniversalClient, keys redisinventory.Keyspace, sku string) (map[string]int64, error) {
	raw, err := client.HGetAll(ctx, keys.RefusalsKey(sku)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the refusals of %s: %w", sku, err)
	}
	out := make(map[string]int64, len(raw))
	for reason, v := range raw {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("refusals of %s, %s: %q is not a count: %w", sku, reason, v, err)
		}
		out[reason] = n
	}
	return out, nil
}
