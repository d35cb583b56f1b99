package pgstore

import (
	"encoding/json"
	"fmt"

	"github.com/invledger/invledger/ledger/reconcile"
)

// storedFiguresVersion is the version storedFiguresV1 writes.
const storedFiguresVersion = 1

// storedFiguresV1 is how the before and after columns of
// reconciliation_findings hold a finding's figures; MissingSeqs is set only
// in before. Once a release has written them, a change of key or meaning
// needs a new version and a reader for every older one.
type storedFiguresV1 struct {
	Version          int                `json:"version"`
	RedisStock       *int64             `json:"redis_stock"`
	RedisSeq         *int64             `json:"redis_seq"`
	RedisBuyers      *int64             `json:"redis_buyers,omitempty"`
	RedisReceipts    *int64             `json:"redis_receipts,omitempty"`
	LedgerStock      int64              `json:"ledger_stock"`
	LedgerSeq        int64              `json:"ledger_seq"`
	LedgerCount      int64              `json:"ledger_count"`
	Holders          int64              `json:"ledger_holders"`
	LedgerDeductions int64              `json:"ledger_deductions,omitempty"`
	InFlight         int                `json:"in_flight"`
	InFlightSum      int64              `json:"in_flight_delta"`
	TruthStock       int64              `json:"truth_stock"`
	TruthSeq         int64              `json:"truth_seq"`
	BalanceStock     *int64             `json:"balance_stock,omitempty"`
	BalanceSeq       *int64             `json:"balance_seq,omitempty"`
	MissingSeqs      []storedSeqRangeV1 `json:"missing_seqs,omitempty"`
}

// storedSeqRangeV1 is an inclusive range of missing seqs in storedFiguresV1.
type storedSeqRangeV1 struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// newStoredFigures maps f and the missing seqs onto the stored form.
func newStoredFigures(f reconcile.Figures, missing []reconcile.SeqRange) storedFiguresV1 {
	s := storedFiguresV1{
		Version:          storedFiguresVersion,
		RedisStock:       f.RedisStock,
		RedisSeq:         f.RedisSeq,
		RedisBuyers:      f.RedisBuyers,
		RedisReceipts:    f.RedisReceipts,
		LedgerDeductions: f.LedgerDeductions,
		LedgerStock:      f.LedgerStock,
		LedgerSeq:        f.LedgerSeq,
		LedgerCount:      f.LedgerCount,
		Holders:          f.Holders,
		InFlight:         f.InFlight,
		InFlightSum:      f.InFlightSum,
		TruthStock:       f.TruthStock,
		TruthSeq:         f.TruthSeq,
		BalanceStock:     f.BalanceStock,
		BalanceSeq:       f.BalanceSeq,
	}
	for _, r := range missing {
		s.MissingSeqs = append(s.MissingSeqs, storedSeqRangeV1{From: r.From, To: r.To})
	}
	return s
}

// loadStoredFigures decodes stored figures of the one version there is.
func loadStoredFigures(raw []byte) (storedFiguresV1, error) {
	var s storedFiguresV1
	if err := json.Unmarshal(raw, &s); err != nil {
		return storedFiguresV1{}, fmt.Errorf("decode stored figures: %w", err)
	}
	if s.Version != storedFiguresVersion {
		return storedFiguresV1{}, fmt.Errorf("stored figures have version %d; this build reads version %d", s.Version, storedFiguresVersion)
	}
	return s, nil
}

// figures maps the stored figures onto reconcile's.
func (s storedFiguresV1) figures() reconcile.Figures {
	return reconcile.Figures{
		RedisStock:       s.RedisStock,
		RedisSeq:         s.RedisSeq,
		RedisBuyers:      s.RedisBuyers,
		RedisReceipts:    s.RedisReceipts,
		LedgerDeductions: s.LedgerDeductions,
		LedgerStock:      s.LedgerStock,
		LedgerSeq:        s.LedgerSeq,
		LedgerCount:      s.LedgerCount,
		Holders:          s.Holders,
		InFlight:         s.InFlight,
		InFlightSum:      s.InFlightSum,
		TruthStock:       s.TruthStock,
		TruthSeq:         s.TruthSeq,
		BalanceStock:     s.BalanceStock,
		BalanceSeq:       s.BalanceSeq,
	}
}

// missingSeqs maps the stored missing seqs onto reconcile's.
func (s storedFiguresV1) missingSeqs() []reconcile.SeqRange {
	var out []reconcile.SeqRange
	for _, r := range s.MissingSeqs {
		out = append(out, reconcile.SeqRange{From: r.From, To: r.To})
	}
	return out
}
