package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// settleQueue bounds the order ids waiting to be settled; a sweep pass
// expires at most a few thousand holds, and most have no order.
const settleQueue = 4096

// orderSettler undoes, beside the sweeper, the orders a confirm cut short
// left half sold (ledger.Orders.Settle): once a line of an order expires,
// the order can no longer be confirmed whole, so its confirmed lines are
// released. The sweeper hands it order ids without waiting; an id that
// finds the queue full, or still waits when the process stops, is left to
// the next confirm of that order, which undoes it all the same.
type orderSettler struct {
	orders *ledger.Orders
	queue  chan string
	log    *slog.Logger
}

func newOrderSettler(orders *ledger.Orders, log *slog.Logger) *orderSettler {
	return &orderSettler{orders: orders, queue: make(chan string, settleQueue), log: log}
}

// expired fits redisinventory.SweeperConfig.OnExpired beside the metrics.
func (s *orderSettler) expired(h domain.Hold) {
	if h.OrderID == "" {
		return
	}
	select {
	case s.queue <- h.OrderID:
	default:
		s.log.Warn("order settle queue full: the order is undone at its next confirm", "order_id", h.OrderID)
	}
}

func (s *orderSettler) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case id := <-s.queue:
			s.settle(ctx, id)
		}
	}
}

// settle tries an order up to five times, with a deadline each and a
// growing pause between, so a short Redis outage does not lose it.
func (s *orderSettler) settle(ctx context.Context, raw string) {
	id, err := domain.NewOrderID(raw)
	if err != nil {
		s.log.Error("expired hold names an invalid order id", "order_id", raw, "err", err)
		return
	}
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		released, err := s.orders.Settle(actx, id)
		cancel()
		switch {
		case err == nil:
			if released > 0 {
				s.log.Warn("order undone: a line expired after others were confirmed, so the confirmed lines were released",
					"order_id", raw, "released_lines", released)
			}
			return
		case errors.Is(err, domain.ErrNotFound):
			s.log.Warn("an expired hold names an order whose record is gone: nothing to settle", "order_id", raw)
			return
		case attempt == 5:
			s.log.Error("order not settled: confirm it again to undo it", "order_id", raw, "err", err)
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
