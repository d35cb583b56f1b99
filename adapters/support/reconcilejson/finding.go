package reconcilejson

import "github.com/invledger/invledger/ledger/reconcile"

// Finding is a reconcile.Finding.
type Finding struct {
	SKU         string        `json:"sku"`
	Class       string        `json:"class"`
	Detail      string        `json:"detail"`
	Before      Figures       `json:"before"`
	After       *Figures      `json:"after,omitempty"`
	MissingSeqs []SeqRange    `json:"missing_seqs,omitempty"`
	Lost        []LostReceipt `json:"lost,omitempty"`
	Repaired    bool          `json:"repaired"`
	RepairError string        `json:"repair_error,omitempty"`
}

// Figures are a reconcile.Figures: the numbers a finding compares.
type Figures struct {
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

// SeqRange is a reconcile.SeqRange: seqs From to To, both included.
type SeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// LostReceipt is a reconcile.LostReceipt.
type LostReceipt struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

// NewFinding maps f field by field; empty lists are left out.
func NewFinding(f reconcile.Finding) Finding {
	out := Finding{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail, Before: NewFigures(f.Before),
		After: NewOptionalFigures(f.After), MissingSeqs: NewSeqRanges(f.MissingSeqs),
		Repaired: f.Repaired, RepairError: f.RepairError}
	for _, l := range f.Lost {
		out.Lost = append(out.Lost, LostReceipt{Seq: l.Seq, EventID: l.EventID, RequestID: l.RequestID, User: l.User, Qty: l.Qty})
	}
	return out
}

// NewFigures maps f field by field.
func NewFigures(f reconcile.Figures) Figures {
	return Figures{
		RedisStock: f.RedisStock, RedisSeq: f.RedisSeq, RedisBuyers: f.RedisBuyers, RedisReceipts: f.RedisReceipts,
		LedgerDeductions: f.LedgerDeductions,
		LedgerStock:      f.LedgerStock, LedgerSeq: f.LedgerSeq, LedgerCount: f.LedgerCount, Holders: f.Holders,
		InFlight: f.InFlight, InFlightSum: f.InFlightSum, TruthStock: f.TruthStock, TruthSeq: f.TruthSeq,
		BalanceStock: f.BalanceStock, BalanceSeq: f.BalanceSeq,
	}
}

// NewOptionalFigures keeps absent figures absent.
func NewOptionalFigures(f *reconcile.Figures) *Figures {
	if f == nil {
		return nil
	}
	out := NewFigures(*f)
	return &out
}

// NewSeqRanges maps rs; none gives nil, which is left out.
func NewSeqRanges(rs []reconcile.SeqRange) []SeqRange {
	var out []SeqRange
	for _, r := range rs {
		out = append(out, SeqRange{From: r.From, To: r.To})
	}
	return out
}
