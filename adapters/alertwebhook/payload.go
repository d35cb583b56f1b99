package alertwebhook

import (
	"time"

	"github.com/invledger/invledger/ledger/reconcile"
)

// Kinds of alert, the "kind" of a webhookAlert.
const (
	kindFinding    = "reconciliation_finding"
	kindDeadLetter = "dead_letter"
	kindFenced     = "fenced_skus"
)

// Severities of an alert.
const (
	severityCritical = "critical"
	severityWarning  = "warning"
)

// webhookAlert is the JSON body POSTed to the webhook. Kind says which of
// the optional parts is set.
type webhookAlert struct {
	// Kind is "reconciliation_finding", "dead_letter" or "fenced_skus".
	Kind     string    `json:"kind"`
	Severity string    `json:"severity"`
	At       time.Time `json:"at"`
	// Finding is set for reconciliation_finding.
	Finding *webhookFinding `json:"finding,omitempty"`
	// DeadLetter is set for dead_letter: a stream entry that was not projected.
	DeadLetter *webhookDeadLetter `json:"dead_letter,omitempty"`
	// Fenced is set for fenced_skus: SKUs still refusing purchases after a
	// verification pass.
	Fenced *webhookFenced `json:"fenced,omitempty"`
}

// webhookDeadLetter describes an entry stored in dead_letters.
type webhookDeadLetter struct {
	Stream   string `json:"stream"`
	StreamID string `json:"stream_id"`
	Reason   string `json:"reason"`
}

// webhookFenced counts SKUs left fenced after Redis restarted.
type webhookFenced struct {
	Count int `json:"count"`
}

type webhookFinding struct {
	SKU         string               `json:"sku"`
	Class       string               `json:"class"`
	Detail      string               `json:"detail"`
	Before      webhookFigures       `json:"before"`
	After       *webhookFigures      `json:"after,omitempty"`
	MissingSeqs []webhookSeqRange    `json:"missing_seqs,omitempty"`
	Lost        []webhookLostReceipt `json:"lost,omitempty"`
	Repaired    bool                 `json:"repaired"`
	RepairError string               `json:"repair_error,omitempty"`
}

type webhookFigures struct {
	RedisStock   *int64 `json:"redis_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	RedisBuyers  *int64 `json:"redis_buyers,omitempty"`
	LedgerStock  int64  `json:"ledger_stock"`
	LedgerSeq    int64  `json:"ledger_seq"`
	LedgerCount  int64  `json:"ledger_count"`
	Holders      int64  `json:"ledger_holders"`
	InFlight     int    `json:"in_flight"`
	InFlightSum  int64  `json:"in_flight_delta"`
	TruthStock   int64  `json:"truth_stock"`
	TruthSeq     int64  `json:"truth_seq"`
	BalanceStock *int64 `json:"balance_stock,omitempty"`
	BalanceSeq   *int64 `json:"balance_seq,omitempty"`
}

type webhookSeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

type webhookLostReceipt struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

func newWebhookFinding(f reconcile.Finding) *webhookFinding {
	w := &webhookFinding{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail, Before: newWebhookFigures(f.Before),
		Repaired: f.Repaired, RepairError: f.RepairError}
	if f.After != nil {
		after := newWebhookFigures(*f.After)
		w.After = &after
	}
	for _, r := range f.MissingSeqs {
		w.MissingSeqs = append(w.MissingSeqs, webhookSeqRange{From: r.From, To: r.To})
	}
	for _, l := range f.Lost {
		w.Lost = append(w.Lost, webhookLostReceipt{Seq: l.Seq, EventID: l.EventID, RequestID: l.RequestID, User: l.User, Qty: l.Qty})
	}
	return w
}

func newWebhookFigures(f reconcile.Figures) webhookFigures {
	return webhookFigures{
		RedisStock: f.RedisStock, RedisSeq: f.RedisSeq, RedisBuyers: f.RedisBuyers,
		LedgerStock: f.LedgerStock, LedgerSeq: f.LedgerSeq, LedgerCount: f.LedgerCount, Holders: f.Holders,
		InFlight: f.InFlight, InFlightSum: f.InFlightSum, TruthStock: f.TruthStock, TruthSeq: f.TruthSeq,
		BalanceStock: f.BalanceStock, BalanceSeq: f.BalanceSeq,
	}
}

// severity rates a finding as the webhook schema documents it: redis_high
// and ledger_gap are critical, every other class a warning.
func severity(f reconcile.Finding) string {
	if f.Class == reconcile.ClassRedisHigh || f.Class == reconcile.ClassLedgerGap {
		return severityCritical
	}
	return severityWarning
}
