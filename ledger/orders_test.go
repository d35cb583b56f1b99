package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// assertUnsold checks that each of skus, stocked with 10 units, has all 10
// back in Redis and none held.
func assertUnsold(t *testing.T, s *stacktest.Stack, what string, skus ...string) {
	t.Helper()
	for _, sku := range skus {
		v, err := s.RedisClient.HMGet(context.Background(), s.Keyspace.SKUKey(sku), "stock", "held").Result()
		if err != nil {
			t.Fatal(err)
		}
		if v[0] != "10" || (v[1] != nil && v[1] != "0") {
			t.Fatalf("%s: %s has stock %v, held %v; want 10 and 0", what, sku, v[0], v[1])
		}
	}
}

// TestOrdersNeverEndHalfSold places orders of two SKUs against real Redis
// and ends them the ways that must undo every line: a refused line, a line
// cancelled or expired before the confirm, a line confirmed on its own
// before another ended. Each time both SKUs' stock and held units are back
// where they began, and the refusal names the line.
func TestOrdersNeverEndHalfSold(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "ord-a", 10, 5)
	s.SKU(t, "ord-b", 10, 5)
	s.SKU(t, "ord-none", 1, 1)
	orders, holds := s.App.Orders, s.App.Holds
	place := func(id string, ttl int64, lines ...ledger.OrderLineInput) (ledger.Order, error) {
		t.Helper()
		cmd, err := orders.NewPlaceOrderCommand(id, "buyer-"+id, &ttl, lines)
		if err != nil {
			t.Fatal(err)
		}
		return orders.Place(ctx, cmd)
	}
	unsold := func(what string) {
		t.Helper()
		assertUnsold(t, s, what, "ord-a", "ord-b")
	}
	ab := []ledger.OrderLineInput{{SKU: "ord-a", Qty: 2}, {SKU: "ord-b", Qty: 3}}
	lineRef := func(o ledger.Order, i int) ledger.HoldRef {
		ref, err := ledger.NewHoldRef(o.Lines[i].SKU, o.Lines[i].HoldID)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	id := func(s string) domain.OrderID { o, _ := domain.NewOrderID(s); return o }

	// A refused line cancels the lines before it.
	_, err := place("refused", 60, ab[0], ab[1], ledger.OrderLineInput{SKU: "ord-none", Qty: 1}, ledger.OrderLineInput{SKU: "ord-none-2", Qty: 1})
	var oe *domain.OrderError
	if !errors.As(err, &oe) || oe.Field != "lines[3]" || domain.CodeOf(err) != domain.CodeNotWarmed {
		t.Fatalf("order with an unknown sku on line 3 = %v", err)
	}
	if s.RedisClient.HGet(ctx, s.Keyspace.SKUKey("ord-none"), "stock").Val() != "1" {
		t.Fatal("ord-none's line was not cancelled")
	}
	unsold("a refused order")

	// A line cancelled before the confirm: the confirm fails on it and cancels the other.
	o, err := place("cancelled-line", 60, ab...)
	if err != nil || o.Status != domain.OrderHeld {
		t.Fatalf("place = %+v, %v", o, err)
	}
	if _, err := holds.Cancel(ctx, lineRef(o, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := orders.Confirm(ctx, id("cancelled-line")); !errors.Is(err, domain.ErrHoldCancelled) || !errors.As(err, &oe) || oe.Field != "lines[1]" {
		t.Fatalf("confirm with line 1 cancelled = %v", err)
	}
	unsold("a confirm refused by a cancelled line")
	if got, err := orders.Order(ctx, id("cancelled-line")); err != nil || got.Status != domain.OrderCancelled {
		t.Fatalf("order after the refused confirm = %+v, %v", got, err)
	}

	// A line confirmed on its own, then another cancelled: the confirmed one is released.
	o, err = place("confirmed-line", 60, ab...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holds.Confirm(ctx, lineRef(o, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := holds.Cancel(ctx, lineRef(o, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := orders.Confirm(ctx, id("confirmed-line")); !errors.Is(err, domain.ErrHoldCancelled) {
		t.Fatalf("confirm with line 1 cancelled = %v", err)
	}
	unsold("a confirm refused after line 0 was sold")
	// Line 0's sale was undone, so the order reads as cancelled, and
	// cancelling it is a repeat, not a conflict with a confirmed line.
	if got, err := orders.Order(ctx, id("confirmed-line")); err != nil || got.Status != domain.OrderCancelled || got.Lines[0].Status != domain.HoldReleased {
		t.Fatalf("order undone after line 0 was sold = %+v, %v; want cancelled, line 0 released", got, err)
	}
	if got, err := orders.Cancel(ctx, id("confirmed-line")); err != nil || got.Status != domain.OrderCancelled {
		t.Fatalf("cancel of the undone order = %+v, %v", got, err)
	}

	// Expired lines: the confirm fails with hold_expired, and cancel leaves them expired.
	if _, err := place("expired", 1, ab...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := orders.Confirm(ctx, id("expired")); !errors.Is(err, domain.ErrHoldExpired) || !errors.As(err, &oe) || oe.Field != "lines[0]" {
		t.Fatalf("confirm after the deadline = %v", err)
	}
	if got, err := orders.Cancel(ctx, id("expired")); err != nil || got.Status != domain.OrderExpired {
		t.Fatalf("cancel after the deadline = %+v, %v", got, err)
	}

	// A retry names the same holds; one with another body is a conflict naming the member.
	first, err := place("retried", 60, ab...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := place("retried", 60, ab...)
	if err != nil || !again.Replayed || again.Lines[1].HoldID != first.Lines[1].HoldID {
		t.Fatalf("retry = %+v, %v; first %+v", again, err, first)
	}
	if _, err := place("retried", 61, ab...); !errors.Is(err, domain.ErrConflict) || !errors.As(err, &oe) || oe.Field != "ttl_seconds" {
		t.Fatalf("retry with another ttl = %v", err)
	}
	if got, err := orders.Confirm(ctx, id("retried")); err != nil || got.Status != domain.OrderConfirmed {
		t.Fatalf("confirm = %+v, %v", got, err)
	}
	if _, err := orders.Cancel(ctx, id("retried")); !errors.Is(err, domain.ErrHoldConfirmed) {
		t.Fatalf("cancel of a confirmed order = %v", err)
	}
	if _, err := orders.Order(ctx, id("never")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown order = %v", err)
	}
}

// placeCutShort places order id, of qty 2 of SKU id-a and 3 of id-b
// (each created with stock 10) for 1 s, and confirms line 0 through its
// hold, which leaves Redis as a confirm of the order cut short after that
// line would. It returns the order as placed and line 0 confirmed.
func placeCutShort(t *testing.T, s *stacktest.Stack, id string) (ledger.Order, domain.Hold) {
	t.Helper()
	ctx := context.Background()
	s.SKU(t, id+"-a", 10, 5)
	s.SKU(t, id+"-b", 10, 5)
	ttl := int64(1)
	cmd, err := s.App.Orders.NewPlaceOrderCommand(id, "buyer", &ttl, []ledger.OrderLineInput{{SKU: id + "-a", Qty: 2}, {SKU: id + "-b", Qty: 3}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.App.Orders.Place(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ledger.NewHoldRef(o.Lines[0].SKU, o.Lines[0].HoldID)
	if err != nil {
		t.Fatal(err)
	}
	confirmed, err := s.App.Holds.Confirm(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return o, confirmed
}

// TestSettleUndoesAnOrderAConfirmCutShortLeftHalfSold: a confirm cut short
// after its first line (here that line is confirmed through the hold, which
// leaves Redis as the cut-short confirm would) leaves the other line held.
// Settle leaves the order alone while that line could still be confirmed,
// and once it expired releases the confirmed line, once.
func TestSettleUndoesAnOrderAConfirmCutShortLeftHalfSold(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	o, _ := placeCutShort(t, s, "cut")
	id, _ := domain.NewOrderID("cut")
	if n, err := s.App.Orders.Settle(ctx, id); err != nil || n != 0 {
		t.Fatalf("settle while line 1 is held = %d, %v; want nothing undone", n, err)
	}
	time.Sleep(time.Until(o.Lines[1].ExpiresAt) + 50*time.Millisecond) // line 1 was reserved last
	if n, err := s.App.HoldExpiry.Expire(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want line 1 expired", n, err)
	}
	if n, err := s.App.Orders.Settle(ctx, id); err != nil || n != 1 {
		t.Fatalf("settle after line 1 expired = %d, %v; want line 0 released", n, err)
	}
	if n, err := s.App.Orders.Settle(ctx, id); err != nil || n != 0 {
		t.Fatalf("second settle = %d, %v; want nothing more", n, err)
	}
	if got, err := s.App.Orders.Order(ctx, id); err != nil || got.Status != domain.OrderExpired {
		t.Fatalf("order after the settle = %+v, %v; want expired", got, err)
	}
	assertUnsold(t, s, "after the settle", "cut-a", "cut-b")
	s.ProjectStreams(t)
	var reason string
	if err := s.Pool.QueryRow(ctx, `SELECT reason FROM ledger_entries WHERE sku = 'cut-a' AND type = 'released'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if want := "order cut not confirmed: line 1 hold_expired"; reason != want {
		t.Fatalf("release reason %q, want %q", reason, want)
	}
}

// TestAnOrderOutlivesAWipeOfRedis: Redis is wiped with an order's lines
// held and every SKU restored from the ledger, which rebuilds the holds but
// not the order's record. The order is still found, as placed and with its
// lines in order, from the ledger's reserved events; a retry of the placing
// replays it, and it confirms. An order the ledger never saw is not found.
func TestAnOrderOutlivesAWipeOfRedis(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	lines := []ledger.OrderLineInput{{SKU: "wipe-c", Qty: 1}, {SKU: "wipe-a", Qty: 2}, {SKU: "wipe-b", Qty: 3}}
	for _, l := range lines {
		s.SKU(t, l.SKU, 10, 5)
	}
	ttl := int64(120)
	cmd, err := s.App.Orders.NewPlaceOrderCommand("wiped", "buyer", &ttl, lines)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := s.App.Orders.Place(ctx, cmd)
	if err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if err := s.Recovery(t).RestoreSKU(ctx, l.SKU); err != nil {
			t.Fatal(err)
		}
	}
	id, _ := domain.NewOrderID("wiped")
	got, err := s.App.Orders.Order(ctx, id)
	if err != nil || got.Status != domain.OrderHeld || got.User != "buyer" || len(got.Lines) != 3 {
		t.Fatalf("order after the wipe = %+v, %v; want it held, as placed", got, err)
	}
	for i, h := range got.Lines {
		if h.SKU != lines[i].SKU || h.Qty != lines[i].Qty || h.HoldID != placed.Lines[i].HoldID {
			t.Fatalf("line %d after the wipe = %+v, want %+v", i, h, placed.Lines[i])
		}
	}
	if again, err := s.App.Orders.Place(ctx, cmd); err != nil || !again.Replayed {
		t.Fatalf("retried placing after the wipe = %+v, %v; want it replayed", again, err)
	}
	if done, err := s.App.Orders.Confirm(ctx, id); err != nil || done.Status != domain.OrderConfirmed {
		t.Fatalf("confirm after the wipe = %+v, %v", done, err)
	}
	never, _ := domain.NewOrderID("never-placed")
	if _, err := s.App.Orders.Order(ctx, never); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("an order the ledger never saw = %v, want not found", err)
	}
}
