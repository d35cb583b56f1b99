package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestAdjustmentStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	defineSKU(t, pgstore.NewPostgresSKUStore(pool), "a", 10, 1)
	store := pgstore.NewPostgresAdjustmentStore(pool)
	request := func(sku string, delta int64) domain.AdjustmentRequest {
		t.Helper()
		r, err := domain.NewAdjustmentRequest(sku, delta, "recount", "alice")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	if _, err := store.Create(ctx, request("nope", 1)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("request for unknown sku: %v, want ErrNotFound", err)
	}
	if _, err := store.Get(ctx, 42); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("get unknown: %v, want ErrNotFound", err)
	}
	adj, err := store.Create(ctx, request("a", -2))
	if err != nil || adj.Status != domain.AdjustmentPending || adj.SKU != "a" || adj.Delta != -2 || adj.RequestedBy != "alice" {
		t.Fatalf("create: %+v %v", adj, err)
	}
	rejected, err := store.Create(ctx, request("a", 5))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := store.CountPending(ctx); err != nil || n != 2 {
		t.Fatalf("pending: %d %v, want 2", n, err)
	}

	eventID := uuid.NewString()
	decided, ok, err := store.Decide(ctx, adj.ID, domain.AdjustmentApproved, "bob", eventID)
	if err != nil || !ok || decided.Status != domain.AdjustmentApproved || *decided.DecidedBy != "bob" || *decided.EventID != eventID {
		t.Fatalf("approve: %+v %v %v", decided, ok, err)
	}
	if again, ok, err := store.Decide(ctx, adj.ID, domain.AdjustmentRejected, "carol", ""); err != nil || ok || again.Status != domain.AdjustmentApproved {
		t.Fatalf("second decision: %+v %v %v, want the approved row, undecided", again, ok, err)
	}
	if _, _, err := store.Decide(ctx, 42, domain.AdjustmentRejected, "carol", ""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("decide unknown: %v, want ErrNotFound", err)
	}
	if _, ok, err := store.Decide(ctx, rejected.ID, domain.AdjustmentRejected, "carol", ""); err != nil || !ok {
		t.Fatalf("reject: %v %v", ok, err)
	}
	settle := func(st *ledger.Settlement) func(context.Context, domain.Adjustment) (*ledger.Settlement, error) {
		return func(context.Context, domain.Adjustment) (*ledger.Settlement, error) { return st, nil }
	}
	seq := int64(7)
	if got, err := store.Settle(ctx, rejected.ID, settle(&ledger.Settlement{Status: domain.AdjustmentApplied, Result: "x"})); err != nil || got.Status != domain.AdjustmentRejected {
		t.Fatalf("settle a rejected adjustment: %+v %v, want it unchanged", got, err)
	}
	if _, err := store.Settle(ctx, 42, settle(nil)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("settle unknown: %v, want ErrNotFound", err)
	}
	applied, err := store.Settle(ctx, adj.ID, settle(&ledger.Settlement{Status: domain.AdjustmentApplied, Seq: &seq, Result: "applied at seq 7"}))
	if err != nil || applied.Status != domain.AdjustmentApplied || *applied.Seq != 7 || *applied.Result != "applied at seq 7" || *applied.DecidedBy != "bob" {
		t.Fatalf("settle: %+v %v", applied, err)
	}
	runID, err := pgstore.NewPostgresReconciliationStore(pool).RecordRun(ctx, reconcileReport(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if linked, err := store.LinkReconciliation(ctx, adj.ID, runID); err != nil || *linked.ReconciliationRunID != runID {
		t.Fatalf("link: %+v %v", linked, err)
	}

	if all, err := store.List(ctx, ledger.AdjustmentQuery{Limit: 10}); err != nil || len(all) != 2 || all[0].ID != rejected.ID {
		t.Fatalf("list, newest first: %+v %v", all, err)
	}
	if some, err := store.List(ctx, ledger.AdjustmentQuery{Status: string(domain.AdjustmentApplied), SKU: "a", Limit: 10}); err != nil || len(some) != 1 || some[0].ID != adj.ID {
		t.Fatalf("list applied: %+v %v", some, err)
	}
	if n, err := store.CountPending(ctx); err != nil || n != 0 {
		t.Fatalf("pending: %d %v, want 0", n, err)
	}

	for _, stmt := range []string{`UPDATE adjustments SET delta = 100`, `UPDATE adjustments SET status = 'pending'`, `DELETE FROM adjustments`} {
		if _, err := pool.Exec(ctx, stmt); pgCode(err) != pgInsufficientPrivilege {
			t.Errorf("%s: %v, want refused", stmt, err)
		}
	}
}
