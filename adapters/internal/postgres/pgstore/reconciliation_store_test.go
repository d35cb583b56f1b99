package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/ledger/reconcile"
)

func ptr(n int64) *int64 { return &n }

func TestReconciliationStoreRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	runs := pgstore.NewPostgresReconciliationStore(pool)
	before := reconcile.Figures{RedisStock: ptr(7), RedisSeq: ptr(5), RedisBuyers: ptr(2), LedgerStock: 6, LedgerSeq: 4, LedgerCount: 4,
		Holders: 3, InFlight: 1, InFlightSum: -1, TruthStock: 5, TruthSeq: 5, BalanceStock: ptr(6), BalanceSeq: ptr(4)}
	after := reconcile.Figures{RedisStock: ptr(5), RedisSeq: ptr(5), LedgerStock: 5, LedgerSeq: 5, LedgerCount: 5, TruthStock: 5, TruthSeq: 5}
	repaired := reconcile.Finding{SKU: "a", Class: reconcile.ClassRedisHigh, Detail: "redis high", Before: before, After: &after,
		MissingSeqs: []reconcile.SeqRange{{From: 2, To: 3}}, Repaired: true}
	failed := reconcile.Finding{SKU: "b", Class: reconcile.ClassRedisMissing, Detail: "gone", Before: reconcile.Figures{LedgerStock: 3},
		RepairError: "redis down"}
	report := reconcile.Report{Trigger: "test", Started: t0, Finished: t0.Add(time.Second), Checked: 2,
		Drifts: []reconcile.Finding{repaired, failed}, Repaired: []reconcile.Finding{repaired}}

	first, err := runs.RecordRun(ctx, reconcile.Report{Trigger: "empty", Started: t0, Finished: t0}, errors.New("boom"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := runs.RecordRun(ctx, report, nil)
	if err != nil || second <= first {
		t.Fatalf("second run id %d %v, first %d", second, err, first)
	}

	got, err := runs.Runs(ctx, 0, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("runs: %+v %v", got, err)
	}
	if r := got[1]; r.ID != first || r.Trigger != "empty" || r.Error == nil || *r.Error != "boom" || len(r.Findings) != 0 {
		t.Fatalf("first run: %+v", r)
	}
	r := got[0]
	if r.ID != second || r.Started != "2025-03-01T12:00:00.000Z" || r.Finished != "2025-03-01T12:00:01.000Z" ||
		r.Checked != 2 || r.Drifts != 2 || r.Repaired != 1 || r.Error != nil {
		t.Fatalf("second run: %+v", r)
	}
	repairErr := "redis down"
	want := []reconcile.RecordedFinding{
		{SKU: "a", Class: reconcile.ClassRedisHigh, Detail: "redis high", Repaired: true, After: &after,
			Before: reconcile.RecordedFigures{Figures: before, MissingSeqs: repaired.MissingSeqs}},
		{SKU: "b", Class: reconcile.ClassRedisMissing, Detail: "gone", RepairError: &repairErr,
			Before: reconcile.RecordedFigures{Figures: failed.Before}},
	}
	if !reflect.DeepEqual(r.Findings, want) {
		t.Fatalf("findings:\n got %+v\nwant %+v", r.Findings, want)
	}
	if limited, err := runs.Runs(ctx, 0, 1); err != nil || len(limited) != 1 || limited[0].ID != second {
		t.Fatalf("runs limit 1: %+v %v", limited, err)
	}

	var version int
	if err := pool.QueryRow(ctx, `SELECT (before->>'version')::int FROM reconciliation_findings WHERE sku = 'a'`).Scan(&version); err != nil || version != 1 {
		t.Fatalf("stored version: %d %v, want 1", version, err)
	}
}

// TestReconciliationStoreRefusesUnknownVersions: figures of another
// version than this build writes, a newer one or none at all, are an
// error, never silently misread.
func TestReconciliationStoreRefusesUnknownVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for before, says := range map[string]string{
		`{"version":2,"stock":{"redis":7}}`:  "version 2;",
		`{"redis_stock":7,"ledger_stock":6}`: "version 0;",
	} {
		pool := newPool(t)
		_, err := pool.Exec(ctx, `
INSERT INTO reconciliation_runs (id, trigger, started_at, finished_at, checked, drifts, repaired)
OVERRIDING SYSTEM VALUE VALUES (1, 'loop', now(), now(), 1, 1, 0)`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO reconciliation_findings (run_id, sku, class, detail, before, repaired)
VALUES (1, 'a', 'redis_high', 'd', $1, false)`, before); err != nil {
			t.Fatal(err)
		}
		if _, err := pgstore.NewPostgresReconciliationStore(pool).Runs(ctx, 0, 5); err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("runs over figures %s: %v, want a version error", before, err)
		}
	}
}

// reconcileReport is a run without findings.
func reconcileReport() reconcile.Report {
	return reconcile.Report{Trigger: "adjustment", Started: t0, Finished: t0}
}
