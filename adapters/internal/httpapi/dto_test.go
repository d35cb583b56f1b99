package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/reconcilejson"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
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
	rep := NewReconcileReportJSON(reconcile.Report{Drifts: []reconcile.Finding{finding}, Repaired: []reconcile.Finding{}})

	pinKeys(t, "report", rep, "checked drifts finished_at lagging repaired run_id started_at trigger unverified verified")
	pinKeys(t, "finding", rep.Drifts[0], "after before class detail lost missing_seqs repair_error repaired sku")
	pinKeys(t, "figures", rep.Drifts[0].Before, "balance_seq balance_stock in_flight in_flight_delta ledger_count ledger_holders ledger_seq ledger_stock redis_buyers redis_seq redis_stock truth_seq truth_stock")
	pinKeys(t, "missing seq range", rep.Drifts[0].MissingSeqs[0], "from to")
	pinKeys(t, "lost receipt", rep.Drifts[0].Lost[0], "event_id qty request_id seq user_id")
	pinKeys(t, "bare finding", reconcilejson.NewFinding(reconcile.Finding{}), "before class detail repaired sku")
	pinKeys(t, "bare figures", reconcilejson.NewFigures(reconcile.Figures{}), "in_flight in_flight_delta ledger_count ledger_holders ledger_seq ledger_stock redis_seq redis_stock truth_seq truth_stock")
	if b, _ := json.Marshal(NewReconcileReportJSON(reconcile.Report{})); !strings.Contains(string(b), `"drifts":null`) {
		t.Errorf("a report without findings: %s, want drifts null as before", b)
	}

	run := NewRunJSON(reconcile.RecordedRun{Findings: []reconcile.RecordedFinding{{}}})
	// Issue 17 (F13): the runs listing counts in drift_count and repaired_count;
	// drifts and repaired are the report's lists, one type per key.
	pinKeys(t, "recorded run", run, "checked drift_count error findings finished_at id repaired_count started_at trigger")
	pinKeys(t, "recorded finding", run.Findings[0], "after before class detail repair_error repaired sku")

	adj := NewAdjustmentJSON(domain.Adjustment{ID: 1, RequestedAt: now, Status: domain.AdjustmentApplied,
		DecidedBy: &s, DecidedAt: &now, EventID: &s, Seq: &n, Result: &s, ReconciliationRunID: &n})
	pinKeys(t, "adjustment", adj, "decided_at decided_by delta event_id id reason reconciliation_run_id requested_at requested_by result seq sku status")
}

// pinJSON fails unless v encodes to exactly want.
func pinJSON(t *testing.T, what string, v any, want string) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s:\n got %s\nwant %s", what, b, want)
	}
}

// TestAuditBodiesAreAsBefore pins the audit bodies byte for byte, as the
// ledger types encoded them before they lost their json tags: full, zero,
// with empty and with nil slices.
func TestAuditBodiesAreAsBefore(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123000000, time.UTC)
	n, c := int64(7), "c1"
	e := ledger.AuditEntry{EventID: "e1", SKU: "a", Seq: 3, Type: domain.EventDeducted, Delta: -2, Qty: 2, BalanceAfter: 8,
		UserID: "u", RequestID: "r", Actor: "ac", Reason: "re", OccurredAt: at, RecordedAt: at.Add(time.Second),
		StreamID: "1-1", PrevHash: "p", Hash: "h"}
	const entry = `{"event_id":"e1","sku":"a","seq":3,"type":"deducted","delta":-2,"qty":2,"balance_after":8,"user_id":"u","request_id":"r","actor":"ac","reason":"re","occurred_at":"2026-11-29T12:00:00.123Z","recorded_at":"2026-11-29T12:00:01.123Z","stream_id":"1-1","prev_hash":"p","hash":"h"}`
	for _, tc := range []struct {
		what string
		v    any
		want string
	}{
		{"entry", NewAuditEntryJSON(e), entry},
		{"zero entry", NewAuditEntryJSON(ledger.AuditEntry{}), `{"event_id":"","sku":"","seq":0,"type":"","delta":0,"qty":0,"balance_after":0,"user_id":"","request_id":"","actor":"","reason":"","occurred_at":"0001-01-01T00:00:00Z","recorded_at":"0001-01-01T00:00:00Z","stream_id":"","prev_hash":"","hash":""}`},
		{"history", NewHistoryPageJSON(ledger.HistoryPage{SKU: "a", Events: []ledger.AuditEntry{e}, NextAfter: &n}), `{"sku":"a","events":[` + entry + `],"next_after":7}`},
		{"zero history", NewHistoryPageJSON(ledger.HistoryPage{}), `{"sku":"","events":null,"next_after":null}`},
		{"empty history", NewHistoryPageJSON(ledger.HistoryPage{Events: []ledger.AuditEntry{}}), `{"sku":"","events":[],"next_after":null}`},
		{"buyers", NewBuyersJSON(ledger.BuyersView{SKU: "a", Buyers: []ledger.Holding{{UserID: "u", Qty: 2}}}), `{"sku":"a","buyers":[{"user_id":"u","qty":2}],"next_after":null}`},
		{"zero buyers", NewBuyersJSON(ledger.BuyersView{}), `{"sku":"","buyers":null,"next_after":null}`},
		{"empty buyers", NewBuyersJSON(ledger.BuyersView{Buyers: []ledger.Holding{}}), `{"sku":"","buyers":[],"next_after":null}`},
		{"stock at", NewStockAtJSON(ledger.StockAt{SKU: "a", At: at, Stock: 5}), `{"sku":"a","at":"2026-11-29T12:00:00.123Z","stock":5}`},
		{"zero stock at", NewStockAtJSON(ledger.StockAt{}), `{"sku":"","at":"0001-01-01T00:00:00Z","stock":0}`},
		{"user page", NewUserPageJSON(ledger.UserPage{UserID: "u", Events: []ledger.AuditEntry{e}, NextAfter: &c}), `{"user_id":"u","events":[` + entry + `],"next_after":"c1"}`},
		{"zero user page", NewUserPageJSON(ledger.UserPage{}), `{"user_id":"","events":null,"next_after":null}`},
		{"empty user page", NewUserPageJSON(ledger.UserPage{Events: []ledger.AuditEntry{}}), `{"user_id":"","events":[],"next_after":null}`},
	} {
		pinJSON(t, tc.what, tc.v, tc.want)
	}
}
