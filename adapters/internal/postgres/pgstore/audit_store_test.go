package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestAuditStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	audit := pgstore.NewPostgresAuditStore(pool)
	events := sale("a", 10, "u1", "u2", "u1")
	release := domain.Event{ID: "00000000-0000-4000-8000-000000000001", Type: domain.EventReleased, SKU: "a", Seq: 5, Qty: 1,
		Delta: 1, Balance: 8, User: "u2", RequestID: "r-rel", Reason: "refund", OccurredAt: t0.Add(time.Hour), StreamID: "1-5"}
	if _, err := pgstore.NewPostgresProjectionStore(pool).AppendBatch(ctx, append(events, release)); err != nil {
		t.Fatal(err)
	}
	sku := mustSKU(t, "a")

	page, err := audit.SKUEntries(ctx, sku, 1, 2)
	if err != nil || len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("sku entries after 1: %+v %v", page, err)
	}
	if e := page[0]; e.EventID != events[1].ID || e.Type != domain.EventDeducted || e.UserID != "u1" || e.RequestID != "r-u1" ||
		e.Delta != -1 || e.BalanceAfter != 9 || !e.OccurredAt.Equal(events[1].OccurredAt) || e.RecordedAt.IsZero() {
		t.Fatalf("audit entry: %+v", e)
	}
	holders, err := audit.Holders(ctx, sku, "", 10)
	if err != nil || len(holders) != 1 || holders[0] != (ledger.Holding{UserID: "u1", Qty: 2}) {
		t.Fatalf("holders: %+v %v, want u1 holding 2", holders, err)
	}
	for at, want := range map[time.Time]int64{t0.Add(-time.Second): 0, t0: 10, t0.Add(3 * time.Minute): 8, t0.Add(2 * time.Hour): 8} {
		if got, err := audit.StockAt(ctx, sku, at); err != nil || got != want {
			t.Errorf("stock at %s: %d %v, want %d", at, got, err, want)
		}
	}
	first, err := audit.UserEntries(ctx, mustUser(t, "u1"), ledger.UserCursor{}, 1)
	if err != nil || len(first) != 1 || first[0].Seq != 2 {
		t.Fatalf("first page of u1: %+v %v", first, err)
	}
	next, err := audit.UserEntries(ctx, mustUser(t, "u1"), ledger.UserCursor{OccurredAt: first[0].OccurredAt, EventID: first[0].EventID}, 10)
	if err != nil || len(next) != 1 || next[0].Seq != 4 {
		t.Fatalf("next page of u1: %+v %v", next, err)
	}
}

func mustUser(t *testing.T, s string) domain.UserID {
	t.Helper()
	id, err := domain.NewUserID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
