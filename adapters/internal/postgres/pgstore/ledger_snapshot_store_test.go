package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
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

	sums, known, err := snapshots.LedgerSnapshot(ctx, []string{"a", "b"}, []string{a[0].ID, b[1].ID})
	if err != nil {
		t.Fatal(err)
	}
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
	if all, _, err := snapshots.LedgerSnapshot(ctx, nil, nil); err != nil || len(all) != 2 {
		t.Fatalf("snapshot of every sku: %v %v", all, err)
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
