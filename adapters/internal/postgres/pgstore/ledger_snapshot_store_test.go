package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
)

func TestLedgerSnapshotStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	snapshots := pgstore.NewPostgresLedgerSnapshotStore(pool)
	a, b := sale("a", 10, "u1", "u2"), sale("b", 4, "u1")
	// The reconciler appends recovered events through the same idempotent path.
	if inserted, err := snapshots.AppendBatch(ctx, append(a, b[0])); err != nil || len(inserted) != 2 {
		t.Fatalf("append: %v %v", inserted, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE balances SET balance = 3 WHERE sku = 'b'`); err != nil {
		t.Fatal(err)
	}

	fold, err := snapshots.LedgerSnapshot(ctx, []string{"a", "b"}, []domain.Event{a[0], b[1]})
	if err != nil {
		t.Fatal(err)
	}
	sums, known := fold.SKUs, fold.Known
	sa, sb := sums["a"], sums["b"]
	if sa.Stock != 8 || sa.Seq != 3 || sa.Count != 3 || sa.Holders != 2 || sa.Balance == nil || sa.Balance.Stock != 8 || sa.Balance.LastSeq != 3 {
		t.Fatalf("summary of a: %+v", sa)
	}
	if sb.Stock != 4 || sb.Seq != 1 || sb.Holders != 0 || sb.Balance == nil || sb.Balance.Stock != 3 {
		t.Fatalf("summary of b: %+v", sb)
	}
	if !known[a[0].ID] || known[b[1].ID] || len(known) != 1 {
		t.Fatalf("known ids: %v", known)
	}
	if all, err := snapshots.LedgerSnapshot(ctx, nil, nil); err != nil || len(all.SKUs) != 2 || len(all.Known) != 0 || len(all.EndedHolds) != 0 {
		t.Fatalf("snapshot of every sku: %+v %v", all, err)
	}
	if known, err := snapshots.KnownEventIDs(ctx, []string{b[0].ID, b[1].ID}); err != nil || !known[b[0].ID] || known[b[1].ID] {
		t.Fatalf("known event ids: %v %v", known, err)
	}
	if known, err := snapshots.KnownEventIDs(ctx, nil); err != nil || len(known) != 0 {
		t.Fatalf("known of no ids: %v %v", known, err)
	}
	if seqs, err := snapshots.Seqs(ctx, mustSKU(t, "a")); err != nil || !slices.Equal(seqs, []int64{1, 2, 3}) {
		t.Fatalf("seqs: %v %v", seqs, err)
	}
}

// TestLedgerSnapshotNamesHoldsEndedBeforeTheirReserve commits a hold's end
// without its reserve, as the projector may when it commits a partition's
// entries concurrently: the snapshot says that hold, of the reserves in
// flight, has ended, and not the one whose end is still to come.
func TestLedgerSnapshotNamesHoldsEndedBeforeTheirReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snapshots := pgstore.NewPostgresLedgerSnapshotStore(newPool(t))
	stocked := sale("held-out-of-order", 10)[0]
	hold := func(seq int64, typ domain.EventType, delta int64, holdID string) domain.Event {
		e := domain.Event{ID: uuid.NewString(), Type: typ, SKU: stocked.SKU, Seq: seq, Qty: 1, Delta: delta,
			Balance: 10 - 1, User: "u", RequestID: "r-" + holdID, OccurredAt: t0, HoldID: holdID,
			StreamID: fmt.Sprintf("1-%d", seq)}
		if typ == domain.EventReserved {
			e.ExpiresAt = t0.Add(time.Minute)
		}
		return e
	}
	ended, open := uuid.NewString(), uuid.NewString()
	reserveEnded, reserveOpen := hold(2, domain.EventReserved, -1, ended), hold(3, domain.EventReserved, -1, open)
	cancel := hold(4, domain.EventCancelled, 1, ended)
	if _, err := snapshots.AppendBatch(ctx, []domain.Event{stocked, cancel}); err != nil {
		t.Fatal(err)
	}
	fold, err := snapshots.LedgerSnapshot(ctx, []string{stocked.SKU}, []domain.Event{reserveEnded, reserveOpen, cancel})
	if err != nil {
		t.Fatal(err)
	}
	if !fold.EndedHolds[ended] || fold.EndedHolds[open] || len(fold.EndedHolds) != 1 {
		t.Fatalf("ended holds %v, want only %s", fold.EndedHolds, ended)
	}
	if !fold.Known[cancel.ID] || len(fold.Known) != 1 {
		t.Fatalf("known events %v, want only the cancel %s", fold.Known, cancel.ID)
	}
	if sum := fold.SKUs[stocked.SKU]; sum.OpenHolds != -1 || len(sum.OpenHoldIDs) != 0 {
		t.Fatalf("the ledger alone: %d open holds %v, want -1 (an end without its reserve) and none named", sum.OpenHolds, sum.OpenHoldIDs)
	}
}
