package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// keysOf returns the keys of the JSON object v encodes to, sorted.
func keysOf(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func pinKeys(t *testing.T, what string, v any, want string) {
	t.Helper()
	if got := strings.Join(keysOf(t, v), " "); got != want {
		t.Errorf("%s keys:\n got %s\nwant %s", what, got, want)
	}
}

// TestBodiesKeepTheirJSONKeys pins the keys of the bodies mapped from
// application types, so renaming a Go field cannot change the API.
func TestBodiesKeepTheirJSONKeys(t *testing.T) {
	n := int64(1)
	s := "x"
	now := time.Now()
	full := reconcile.Figures{RedisStock: &n, RedisSeq: &n, RedisBuyers: &n, BalanceStock: &n, BalanceSeq: &n}
	finding := reconcile.Finding{SKU: "a", Class: reconcile.ClassRedisLow, Before: full, After: &full,
		MissingSeqs: []reconcile.SeqRange{{From: 1, To: 2}}, Lost: []reconcile.LostReceipt{{Seq: 3}},
		Repaired: true, RepairError: "e"}
	rep := newReportJSON(reconcile.Report{Drifts: []reconcile.Finding{finding}, Repaired: []reconcile.Finding{}})

	pinKeys(t, "report", rep, "checked drifts finished_at lagging repaired run_id started_at trigger unverified verified")
	pinKeys(t, "finding", rep.Drifts[0], "after before class detail lost missing_seqs repair_error repaired sku")
	pinKeys(t, "figures", rep.Drifts[0].Before, "balance_seq balance_stock in_flight in_flight_delta ledger_count ledger_holders ledger_seq ledger_stock redis_buyers redis_seq redis_stock truth_seq truth_stock")
	pinKeys(t, "missing seq range", rep.Drifts[0].MissingSeqs[0], "from to")
	pinKeys(t, "lost receipt", rep.Drifts[0].Lost[0], "event_id qty request_id seq user_id")
	pinKeys(t, "bare finding", newFindingJSON(reconcile.Finding{}), "before class detail repaired sku")
	pinKeys(t, "bare figures", newFiguresJSON(reconcile.Figures{}), "in_flight in_flight_delta ledger_count ledger_holders ledger_seq ledger_stock redis_seq redis_stock truth_seq truth_stock")
	if b, _ := json.Marshal(newReportJSON(reconcile.Report{})); !strings.Contains(string(b), `"drifts":null`) {
		t.Errorf("a report without findings: %s, want drifts null as before", b)
	}

	run := newRecordedRunJSON(reconcile.RecordedRun{Findings: []reconcile.RecordedFinding{{}}})
	pinKeys(t, "recorded run", run, "checked drifts error findings finished_at id repaired started_at trigger")
	pinKeys(t, "recorded finding", run.Findings[0], "after before class detail repair_error repaired sku")

	adj := NewAdjustmentJSON(domain.Adjustment{ID: 1, RequestedAt: now, Status: domain.AdjustmentApplied,
		DecidedBy: &s, DecidedAt: &now, EventID: &s, Seq: &n, Result: &s, ReconciliationRunID: &n})
	pinKeys(t, "adjustment", adj, "decided_at decided_by delta event_id id reason reconciliation_run_id requested_at requested_by result seq sku status")
}
