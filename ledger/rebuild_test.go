package ledger_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// ledgerFold is what the balances row of sku must say: the ledger's sum of
// deltas and highest seq.
func ledgerFold(t *testing.T, s *stacktest.Stack, sku string) (balance, seq int64) {
	t.Helper()
	err := s.Pool.QueryRow(context.Background(), `SELECT COALESCE(sum(delta), 0), COALESCE(max(seq), 0) FROM ledger_entries WHERE sku = $1`, sku).
		Scan(&balance, &seq)
	if err != nil {
		t.Fatal(err)
	}
	return balance, seq
}

func balanceRow(t *testing.T, s *stacktest.Stack, sku string) (balance, seq int64, ok bool) {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT balance, last_seq FROM balances WHERE sku = $1`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, 0, false
	}
	if err := rows.Scan(&balance, &seq); err != nil {
		t.Fatal(err)
	}
	return balance, seq, true
}

// TestRebuildBalancesDuringALiveSale tampers with every balances row while a
// sale is being projected, then rebuilds the projection over and over while
// the projector keeps committing: at the end every row equals the ledger.
func TestRebuildBalancesDuringALiveSale(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	skus := []string{"rb-1", "rb-2", "rb-3"}
	for _, sku := range skus {
		s.SKU(t, sku, 400, 1)
	}
	s.RunProjector(t)
	rec := s.Recovery(t)

	// Wait for the stocked events' rows, then sell and tamper while the
	// projector moves them.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM balances`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(skus) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the projector wrote no balances")
		}
		time.Sleep(10 * time.Millisecond)
	}
	saleDone := make(chan struct{})
	var sale sync.WaitGroup
	for _, sku := range skus {
		sale.Go(func() { sell(t, s, sku, 600, 1500, func(int) int64 { return 1 }) })
	}
	go func() { sale.Wait(); close(saleDone) }()
	if _, err := s.Pool.Exec(ctx, `UPDATE balances SET balance = balance + 7`); err != nil {
		t.Fatal(err)
	}
	passes := 0
	for done := false; !done; passes++ {
		select {
		case <-saleDone:
			done = true
		default:
		}
		report, err := rec.RebuildBalances(ctx, nil)
		if err != nil {
			t.Fatalf("rebuild pass %d: %v", passes, err)
		}
		if passes == 0 && !slices.Equal(report.Corrected, skus) {
			t.Fatalf("first pass after tampering corrected %v, want %v", report.Corrected, skus)
		}
	}
	t.Logf("%d rebuild passes during the sale", passes)

	for _, sku := range skus {
		waitLedgerSeq(t, s, sku)
		wantBalance, wantSeq := ledgerFold(t, s, sku)
		if balance, seq, ok := balanceRow(t, s, sku); !ok || balance != wantBalance || seq != wantSeq {
			t.Fatalf("%s: balances row %d at seq %d (exists %v), the ledger folds to %d at seq %d", sku, balance, seq, ok, wantBalance, wantSeq)
		}
	}
}

// TestRebuildBalanceRepairsEachKindOfDrift: a wrong row, a missing row and
// a row for a SKU without ledger rows.
func TestRebuildBalanceRepairsEachKindOfDrift(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "drift-1", 10, 1)
	s.SKU(t, "drift-2", 10, 1)
	s.ProjectStreams(t)
	for _, q := range []string{
		`UPDATE balances SET balance = balance + 7 WHERE sku = 'drift-1'`,
		`DELETE FROM balances WHERE sku = 'drift-2'`,
		`INSERT INTO balances (sku, balance, last_seq) VALUES ('made-up', 5, 3)`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rec := s.Recovery(t)
	if err := rec.RebuildBalance(ctx, mustSKU(t, "drift-1")); err != nil {
		t.Fatal(err)
	}
	if b, seq, _ := balanceRow(t, s, "drift-1"); b != 10 || seq != 1 {
		t.Fatalf("drift-1 after RebuildBalance: %d at seq %d, want 10 at 1", b, seq)
	}
	report, err := rec.RebuildBalances(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if report.SKUs != 3 || !slices.Equal(report.Corrected, []string{"drift-2", "made-up"}) {
		t.Fatalf("report %+v, want 3 skus with drift-2 and made-up corrected", report)
	}
	if b, seq, ok := balanceRow(t, s, "drift-2"); !ok || b != 10 || seq != 1 {
		t.Fatalf("drift-2: %d at seq %d (exists %v), want 10 at 1", b, seq, ok)
	}
	if _, _, ok := balanceRow(t, s, "made-up"); ok {
		t.Fatal("the balances row of a sku without ledger rows survived")
	}
	if report, err := rec.RebuildBalances(ctx, nil); err != nil || len(report.Corrected) != 0 {
		t.Fatalf("second rebuild: %+v %v, want nothing corrected", report, err)
	}
}
