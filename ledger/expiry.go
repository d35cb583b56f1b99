package ledger

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/invledger/invledger/domain"
)

// HoldExpirer ends the holds whose deadline passed: Redis in production.
type HoldExpirer interface {
	// ExpireDue expires the holds due now and returns those it expired,
	// also when err reports some it could not reach. A hold ends once
	// however many callers expire at once: one that another caller, a
	// confirm or a cancel ended first is not returned.
	ExpireDue(ctx context.Context) ([]ExpiredHold, error)
}

// ExpiredHold is a hold that expiry ended, and how late: the inventory's
// clock at expiry minus the hold's deadline.
type ExpiredHold struct {
	Hold     domain.Hold
	Lateness time.Duration
}

// DefaultExpiryInterval is the pause between two expiry passes.
const DefaultExpiryInterval = 200 * time.Millisecond

// settleQueue bounds the orders waiting to be settled; a pass expires at
// most a few thousand holds, and most have no order.
const settleQueue = 4096

// HoldExpiryConfig configures a HoldExpiry. Every field but Logger is
// required.
type HoldExpiryConfig struct {
	Holds   HoldExpirer
	Orders  *Orders
	Metrics *InventoryMetrics
	Logger  *slog.Logger
}

// HoldExpiry expires the holds whose deadline passed and settles their
// orders. It needs no leader and no PostgreSQL: any number may run at
// once, since each hold still expires exactly once. Once a line of an
// order expires, the order can no longer be confirmed whole, so its
// confirmed lines are released (Orders.Settle), which undoes what a
// confirm cut short left half sold. Orders are settled beside the passes,
// so a slow settle never delays an expiry; an order that finds the queue
// full, or still waits when Run ends, is left to its next confirm, which
// undoes it all the same.
//
// Expiries are counted per hold (invledger_holds_expired_total, with
// their lateness), not as inventory operations: one script call expires
// many holds, and an expiry has no caller to refuse. They are not
// journaled either: an expiry Redis loses in everysec mode leaves the
// hold held past its deadline, so the next pass expires it again.
type HoldExpiry struct {
	cfg   HoldExpiryConfig
	queue chan domain.OrderID
}

// NewHoldExpiry returns the expiry service; Run starts it.
func NewHoldExpiry(cfg HoldExpiryConfig) (*HoldExpiry, error) {
	if cfg.Holds == nil || cfg.Orders == nil || cfg.Metrics == nil {
		return nil, errors.New("hold expiry: Holds, Orders and Metrics are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &HoldExpiry{cfg: cfg, queue: make(chan domain.OrderID, settleQueue)}, nil
}

// Expire makes one pass: it expires the holds due now, measures them,
// queues their orders for Run to settle, and returns how many it expired.
func (e *HoldExpiry) Expire(ctx context.Context) (int, error) {
	expired, err := e.cfg.Holds.ExpireDue(ctx)
	if err != nil {
		e.cfg.Metrics.scriptErrors.WithLabelValues("expire").Inc()
	}
	queued := map[string]bool{}
	for _, x := range expired {
		e.cfg.Metrics.observeExpiry(x.Lateness)
		if x.Hold.OrderID == "" || queued[x.Hold.OrderID] {
			continue
		}
		queued[x.Hold.OrderID] = true
		id, idErr := domain.NewOrderID(x.Hold.OrderID)
		if idErr != nil {
			e.cfg.Logger.ErrorContext(ctx, "expired hold names an invalid order id", "order_id", x.Hold.OrderID, "err", idErr)
			continue
		}
		select {
		case e.queue <- id:
		default:
			e.cfg.Logger.WarnContext(ctx, "order settle queue full: the order is undone at its next confirm", "order_id", x.Hold.OrderID)
		}
	}
	return len(expired), err
}

// Run expires every interval (DefaultExpiryInterval if 0) and settles the
// queued orders until ctx ends. A failed pass is logged and the next one
// tries again.
func (e *HoldExpiry) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultExpiryInterval
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case id := <-e.queue:
				e.settle(ctx, id)
			}
		}
	})
	defer wg.Wait()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := e.Expire(ctx); err != nil && ctx.Err() == nil {
			e.cfg.Logger.WarnContext(ctx, "hold expiry: pass failed; retrying at the next one", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// settle tries an order up to five times, with a deadline each and a
// growing pause between, so a short Redis outage does not lose it.
func (e *HoldExpiry) settle(ctx context.Context, id domain.OrderID) {
	log := e.cfg.Logger.With("order_id", id.String())
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		released, err := e.cfg.Orders.Settle(actx, id)
		cancel()
		switch {
		case err == nil:
			if released > 0 {
				log.WarnContext(ctx, "order undone: a line expired after others were confirmed, so the confirmed lines were released",
					"released_lines", released)
			}
			return
		case errors.Is(err, domain.ErrNotFound):
			log.WarnContext(ctx, "an expired hold names an order whose record is gone: nothing to settle")
			return
		case attempt == 5:
			log.ErrorContext(ctx, "order not settled: confirm it again to undo it", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff *= 2
		}
	}
}
