package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
)

// TestClientReadsTheLedger pages through the SKUs, a SKU's events, a
// user's purchases, the buyers, a past balance, the reconciliation runs and
// the operations trail, then closes and retires the SKU: each read answers
// what the sales before it wrote.
func TestClientReadsTheLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "c-read-a", 5, 2)
	st.SKU(t, "c-read-b", 1, 1)
	st.RunProjector(t)
	base := serve(t, st)
	op, gw := newClient(t, base, opSecret), newClient(t, base, gwSecret)

	if _, err := gw.Deduct(ctx, "c-read-a", "u1", 2, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Deduct(ctx, "c-read-a", "u2", 1, "r2"); err != nil {
		t.Fatal(err)
	}
	st.WaitProjected(t, "c-read-a", 30*time.Second)

	first, err := op.SKUs(ctx, "", 1)
	if err != nil || len(first.SKUs) != 1 || first.SKUs[0].SKU != "c-read-a" || first.NextAfter == nil {
		t.Fatalf("SKUs, first page = %+v, %v", first, err)
	}
	if next, err := op.SKUs(ctx, *first.NextAfter, 10); err != nil || len(next.SKUs) != 1 || next.SKUs[0].SKU != "c-read-b" || next.NextAfter != nil {
		t.Fatalf("SKUs after %s = %+v, %v", *first.NextAfter, next, err)
	}
	if h, err := op.Events(ctx, "c-read-a", 1, 10); err != nil || len(h.Events) != 2 || h.Events[0].Seq != 2 || h.Events[1].UserID != "u2" {
		t.Fatalf("Events after seq 1 = %+v, %v; want the two purchases", h, err)
	}
	if p, err := op.Purchases(ctx, "u1", "", 10); err != nil || len(p.Events) != 1 || p.Events[0].SKU != "c-read-a" || p.Events[0].Qty != 2 {
		t.Fatalf("Purchases of u1 = %+v, %v", p, err)
	}
	if b, err := op.Buyers(ctx, "c-read-a", "u1", 10); err != nil || len(b.Buyers) != 1 || b.Buyers[0].UserID != "u2" || b.Buyers[0].Qty != 1 {
		t.Fatalf("Buyers after u1 = %+v, %v", b, err)
	}
	if s, err := op.BalanceAt(ctx, "c-read-a", time.Now()); err != nil || s.Stock != 2 {
		t.Fatalf("BalanceAt now = %+v, %v; want 5-2-1", s, err)
	}

	older, err := op.Reconcile(ctx, "c-read-a", false)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := op.Reconcile(ctx, "", false)
	if err != nil || newer.Checked != 2 {
		t.Fatalf("Reconcile of every SKU = %+v, %v", newer, err)
	}
	runs, err := op.Reconciliations(ctx, 0, 1)
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].ID != newer.RunID || runs.NextAfter == nil {
		t.Fatalf("Reconciliations, first page = %+v, %v; want run %d", runs, err, newer.RunID)
	}
	if runs, err := op.Reconciliations(ctx, *runs.NextAfter, 10); err != nil || len(runs.Runs) != 1 || runs.Runs[0].ID != older.RunID || runs.Runs[0].Checked != 1 {
		t.Fatalf("Reconciliations, second page = %+v, %v; want run %d", runs, err, older.RunID)
	}

	if _, err := op.Close(ctx, "c-read-a"); err != nil {
		t.Fatal(err)
	}
	// Retiring needs the buyers archived, which needs the closed event in
	// the ledger.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := st.App.Archiver.ArchiveBuyers(ctx, "c-read-a")
		if err == nil {
			break
		}
		if !errors.Is(err, ledger.ErrLedgerBehind) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	r, err := op.Retire(ctx, "c-read-a")
	if err != nil || r.Status != "retired" || r.AlreadyRetired {
		t.Fatalf("Retire = %+v, %v", r, err)
	}
	if again, err := op.Retire(ctx, "c-read-a"); err != nil || !again.AlreadyRetired || again.Seq != r.Seq {
		t.Fatalf("Retire again = %+v, %v; want the first retirement", again, err)
	}
	ops, err := op.Operations(ctx, "c-read-a", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	byOlga := map[string]bool{}
	for _, o := range ops.Operations {
		if o.Actor == "olga" {
			byOlga[o.Action] = true
		}
	}
	if !byOlga["close"] || !byOlga["retire"] {
		t.Fatalf("Operations = %+v, want olga's close and retire", ops)
	}
}
