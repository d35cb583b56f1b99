package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/driven/pgstore"
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

// TestReconciliationStoreReadsUnversionedFindings reads findings stored
// before the figures had a version, in the exact JSON the reconcile structs'
// tags produced then.
func TestReconciliationStoreReadsUnversionedFindings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `
INSERT INTO reconciliation_runs (id, trigger, started_at, finished_at, checked, drifts, repaired, error)
OVERRIDING SYSTEM VALUE VALUES (1, 'loop', '2025-03-01T12:00:00Z', '2025-03-01T12:00:02Z', 5, 2, 1, NULL);
INSERT INTO reconciliation_findings (run_id, sku, class, detail, before, after, repaired, repair_error) VALUES
(1, 'a', 'redis_high', 'redis says 7',
 '{"redis_stock":7,"redis_seq":5,"redis_buyers":2,"ledger_stock":6,"ledger_seq":4,"ledger_count":4,"ledger_holders":3,"in_flight":1,"in_flight_delta":-1,"truth_stock":5,"truth_seq":5,"balance_stock":6,"balance_seq":4,"missing_seqs":[{"from":2,"to":3}]}',
 '{"redis_stock":5,"redis_seq":5,"ledger_stock":5,"ledger_seq":5,"ledger_count":5,"ledger_holders":0,"in_flight":0,"in_flight_delta":0,"truth_stock":5,"truth_seq":5}',
 true, NULL),
(1, 'b', 'redis_missing', 'gone',
 '{"redis_stock":null,"redis_seq":null,"ledger_stock":3,"ledger_seq":1,"ledger_count":1,"ledger_holders":0,"in_flight":0,"in_flight_delta":0,"truth_stock":3,"truth_seq":1}',
 NULL, false, 'redis down')`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgstore.NewPostgresReconciliationStore(pool).Runs(ctx, 0, 5)
	if err != nil || len(got) != 1 {
		t.Fatalf("runs: %+v %v", got, err)
	}
	repairErr := "redis down"
	want := []reconcile.RecordedFinding{
		{SKU: "a", Class: reconcile.ClassRedisHigh, Detail: "redis says 7", Repaired: true,
			Before: reconcile.RecordedFigures{
				Figures: reconcile.Figures{RedisStock: ptr(7), RedisSeq: ptr(5), RedisBuyers: ptr(2), LedgerStock: 6, LedgerSeq: 4,
					LedgerCount: 4, Holders: 3, InFlight: 1, InFlightSum: -1, TruthStock: 5, TruthSeq: 5, BalanceStock: ptr(6), BalanceSeq: ptr(4)},
				MissingSeqs: []reconcile.SeqRange{{From: 2, To: 3}}},
			After: &reconcile.Figures{RedisStock: ptr(5), RedisSeq: ptr(5), LedgerStock: 5, LedgerSeq: 5, LedgerCount: 5, TruthStock: 5, TruthSeq: 5}},
		{SKU: "b", Class: reconcile.ClassRedisMissing, Detail: "gone", RepairError: &repairErr,
			Before: reconcile.RecordedFigures{Figures: reconcile.Figures{LedgerStock: 3, LedgerSeq: 1, LedgerCount: 1, TruthStock: 3, TruthSeq: 1}}},
	}
	if r := got[0]; r.ID != 1 || r.Trigger != "loop" || r.Checked != 5 || !reflect.DeepEqual(r.Findings, want) {
		t.Fatalf("run:\n got %+v\nwant findings %+v", r, want)
	}
}

// TestReconciliationStoreRefusesUnknownVersions: figures written by a newer
// build are an error, never silently misread.
func TestReconciliationStoreRefusesUnknownVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	_, err := pool.Exec(ctx, `
INSERT INTO reconciliation_runs (id, trigger, started_at, finished_at, checked, drifts, repaired)
OVERRIDING SYSTEM VALUE VALUES (1, 'loop', now(), now(), 1, 1, 0);
INSERT INTO reconciliation_findings (run_id, sku, class, detail, before, repaired)
VALUES (1, 'a', 'redis_high', 'd', '{"version":2,"stock":{"redis":7}}', false)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.NewPostgresReconciliationStore(pool).Runs(ctx, 0, 5); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("runs over version 2 figures: %v, want a version error", err)
	}
}

// reconcileReport is a run without findings.
func reconcileReport() reconcile.Report {
	return reconcile.Report{Trigger: "adjustment", Started: t0, Finished: t0}
}
