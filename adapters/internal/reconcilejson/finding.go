package reconcilejson

import (
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger/reconcile"
)

// NewFinding maps f field by field; empty lists are left out.
func NewFinding(f reconcile.Finding) wire.FindingJSON {
	out := wire.FindingJSON{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail, Before: NewFigures(f.Before),
		After: NewOptionalFigures(f.After), MissingSeqs: NewSeqRanges(f.MissingSeqs),
		RequestID: f.RequestID, HoldID: f.HoldID, Key: f.Key, Repaired: f.Repaired, RepairError: f.RepairError}
	for _, l := range f.Lost {
		out.Lost = append(out.Lost, wire.LostReceiptJSON{Seq: l.Seq, EventID: l.EventID, RequestID: l.RequestID, User: l.User, Qty: l.Qty})
	}
	return out
}

// NewFigures maps f field by field.
func NewFigures(f reconcile.Figures) wire.FiguresJSON {
	return wire.FiguresJSON{
		RedisStock: f.RedisStock, RedisSeq: f.RedisSeq, RedisBuyers: f.RedisBuyers, RedisReceipts: f.RedisReceipts,
		LedgerDeductions: f.LedgerDeductions,
		LedgerStock:      f.LedgerStock, LedgerSeq: f.LedgerSeq, LedgerCount: f.LedgerCount, Holders: f.Holders,
		InFlight: f.InFlight, InFlightSum: f.InFlightSum, TruthStock: f.TruthStock, TruthSeq: f.TruthSeq,
		BalanceStock: f.BalanceStock, BalanceSeq: f.BalanceSeq,
	}
}

// NewOptionalFigures keeps absent figures absent.
func NewOptionalFigures(f *reconcile.Figures) *wire.FiguresJSON {
	if f == nil {
		return nil
	}
	out := NewFigures(*f)
	return &out
}

// NewSeqRanges maps rs; none gives nil, which is left out.
func NewSeqRanges(rs []reconcile.SeqRange) []wire.SeqRangeJSON {
	var out []wire.SeqRangeJSON
	for _, r := range rs {
		out = append(out, wire.SeqRangeJSON{From: r.From, To: r.To})
	}
	return out
}
