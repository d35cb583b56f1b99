package wire

import "time"

// ReconcileReportJSON is the body of POST /v1/reconcile: a reconcile.Report.
type ReconcileReportJSON struct {
	RunID      int64         `json:"run_id"`
	Trigger    string        `json:"trigger"`
	Started    time.Time     `json:"started_at"`
	Finished   time.Time     `json:"finished_at"`
	Checked    int           `json:"checked"`
	Lagging    int           `json:"lagging"`
	Drifts     []FindingJSON `json:"drifts"`
	Repaired   []FindingJSON `json:"repaired"`
	Verified   int           `json:"verified"`
	Unverified int           `json:"unverified"`
}

// FindingJSON is a reconcile.Finding, as the API's reports and the alert
// webhook's payload show it.
type FindingJSON struct {
	SKU         string            `json:"sku"`
	Class       string            `json:"class"`
	Detail      string            `json:"detail"`
	Before      FiguresJSON       `json:"before"`
	After       *FiguresJSON      `json:"after,omitempty"`
	MissingSeqs []SeqRangeJSON    `json:"missing_seqs,omitempty"`
	Lost        []LostReceiptJSON `json:"lost,omitempty"`
	RequestID   string            `json:"request_id,omitempty"`
	HoldID      string            `json:"hold_id,omitempty"`
	Key         string            `json:"key,omitempty"`
	Repaired    bool              `json:"repaired"`
	RepairError string            `json:"repair_error,omitempty"`
}

// FiguresJSON are a reconcile.Figures: the numbers a finding compares.
type FiguresJSON struct {
	RedisStock       *int64 `json:"redis_stock"`
	RedisSeq         *int64 `json:"redis_seq"`
	RedisBuyers      *int64 `json:"redis_buyers,omitempty"`
	RedisReceipts    *int64 `json:"redis_receipts,omitempty"`
	LedgerStock      int64  `json:"ledger_stock"`
	LedgerSeq        int64  `json:"ledger_seq"`
	LedgerCount      int64  `json:"ledger_count"`
	Holders          int64  `json:"ledger_holders"`
	LedgerDeductions int64  `json:"ledger_deductions,omitempty"`
	InFlight         int    `json:"in_flight"`
	InFlightSum      int64  `json:"in_flight_delta"`
	TruthStock       int64  `json:"truth_stock"`
	TruthSeq         int64  `json:"truth_seq"`
	BalanceStock     *int64 `json:"balance_stock,omitempty"`
	BalanceSeq       *int64 `json:"balance_seq,omitempty"`
}

// SeqRangeJSON is a reconcile.SeqRange: seqs From to To, both included.
type SeqRangeJSON struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// LostReceiptJSON is a reconcile.LostReceipt.
type LostReceiptJSON struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

// RunJSON is one run of GET /v1/reconciliations. Its counts are
// drift_count and repaired_count: in the report of POST /v1/reconcile,
// drifts and repaired are the lists, and one key has one type across the API.
type RunJSON struct {
	ID            int64                 `json:"id"`
	Trigger       string                `json:"trigger"`
	Started       string                `json:"started_at"`
	Finished      string                `json:"finished_at"`
	Checked       int                   `json:"checked"`
	DriftCount    int                   `json:"drift_count"`
	RepairedCount int                   `json:"repaired_count"`
	Error         *string               `json:"error"`
	Findings      []RecordedFindingJSON `json:"findings"`
}

// RecordedFindingJSON is a stored finding. Before carries the missing seqs
// the finding named, as the figures were recorded with them.
type RecordedFindingJSON struct {
	SKU         string              `json:"sku"`
	Class       string              `json:"class"`
	Detail      string              `json:"detail"`
	Before      RecordedFiguresJSON `json:"before"`
	After       *FiguresJSON        `json:"after"`
	Repaired    bool                `json:"repaired"`
	RepairError *string             `json:"repair_error"`
}

// RecordedFiguresJSON are the figures of a stored finding, with the seqs
// it found missing.
type RecordedFiguresJSON struct {
	FiguresJSON
	MissingSeqs []SeqRangeJSON `json:"missing_seqs,omitempty"`
}

// RunPageJSON is the body of GET /v1/reconciliations.
type RunPageJSON struct {
	Runs      []RunJSON `json:"runs"`
	NextAfter *int64    `json:"next_after"`
}
