package redisinventory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// TestCloseAppendsOneClosedEvent: the first close appends a closed event
// (delta 0, balance unchanged, the closer as actor) at the next seq; a
// second close answers the first time and appends nothing; a SKU not
// verified under this Redis run is refused as recovering, unchanged.
func TestCloseAppendsOneClosedEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "close-event", 10, 1)
	must(deduct(t, f, sku, "u1", 1, "r1", uuid.NewString()))
	id := uuid.NewString()
	at, already, err := f.archiver.CloseSKU(ctx, sku, id, "olga")
	if err != nil || already {
		t.Fatalf("close: %v %v", already, err)
	}
	again, already, err := f.archiver.CloseSKU(ctx, sku, uuid.NewString(), "bob")
	if err != nil || !already || !again.Equal(at) {
		t.Fatalf("close again: %v %v %v, want already at %v", again, already, err, at)
	}
	entries := must(f.client.XRange(ctx, f.keys.SKUStreamKey(sku.String()), "-", "+").Result())
	var closed []domain.Event
	for _, m := range entries {
		e, err := streamentry.ParseMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		if e.SKU == sku.String() && e.Type == domain.EventClosed {
			closed = append(closed, e)
		}
	}
	if len(closed) != 1 {
		t.Fatalf("%d closed events, want 1", len(closed))
	}
	e := closed[0]
	if e.ID != id || e.Seq != 3 || e.Delta != 0 || e.Qty != 0 || e.Balance != 9 || e.Actor != "olga" {
		t.Errorf("closed event %+v, want id %s seq 3 delta 0 balance 9 actor olga", e, id)
	}

	other := f.warm(t, "close-fenced", 5, 1)
	if err := f.client.HSet(ctx, f.keys.SKUKey(other.String()), "fence", "another-run").Err(); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	if _, _, err := f.archiver.CloseSKU(ctx, other, uuid.NewString(), "olga"); !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("close of an unverified sku: %v, want ErrRecovering", err)
	}
	assertSame(t, before, f.snapshot(t))
}
