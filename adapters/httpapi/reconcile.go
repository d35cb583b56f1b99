package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Reconciler runs reconciliations. *reconcile.Reconciler implements it.
type Reconciler interface {
	Run(ctx context.Context, opts reconcile.Options) (reconcile.Report, error)
}

var _ Reconciler = (*reconcile.Reconciler)(nil)

// RunLister lists recorded reconciliation runs.
type RunLister interface {
	Runs(ctx context.Context, limit int) ([]reconcile.RecordedRun, error)
}

// reconcileRequest is the optional body of POST /v1/reconcile.
type reconcileRequest struct {
	SKU    string `json:"sku"`
	Repair bool   `json:"repair"`
}

// reportJSON is the body of POST /v1/reconcile: a reconcile.Report.
type reportJSON struct {
	RunID      int64         `json:"run_id"`
	Trigger    string        `json:"trigger"`
	Started    time.Time     `json:"started_at"`
	Finished   time.Time     `json:"finished_at"`
	Checked    int           `json:"checked"`
	Lagging    int           `json:"lagging"`
	Drifts     []findingJSON `json:"drifts"`
	Repaired   []findingJSON `json:"repaired"`
	Verified   int           `json:"verified"`
	Unverified int           `json:"unverified"`
}

// findingJSON is a reconcile.Finding in a report body.
type findingJSON struct {
	SKU         string            `json:"sku"`
	Class       string            `json:"class"`
	Detail      string            `json:"detail"`
	Before      figuresJSON       `json:"before"`
	After       *figuresJSON      `json:"after,omitempty"`
	MissingSeqs []seqRangeJSON    `json:"missing_seqs,omitempty"`
	Lost        []lostReceiptJSON `json:"lost,omitempty"`
	Repaired    bool              `json:"repaired"`
	RepairError string            `json:"repair_error,omitempty"`
}

// figuresJSON is a reconcile.Figures: the numbers a finding compares.
type figuresJSON struct {
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

type seqRangeJSON struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

type lostReceiptJSON struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

func newReportJSON(r reconcile.Report) reportJSON {
	return reportJSON{
		RunID: r.RunID, Trigger: r.Trigger, Started: r.Started, Finished: r.Finished,
		Checked: r.Checked, Lagging: r.Lagging,
		Drifts: mapSlice(r.Drifts, newFindingJSON), Repaired: mapSlice(r.Repaired, newFindingJSON),
		Verified: r.Verified, Unverified: r.Unverified,
	}
}

func newFindingJSON(f reconcile.Finding) findingJSON {
	out := findingJSON{
		SKU: f.SKU, Class: string(f.Class), Detail: f.Detail, Before: newFiguresJSON(f.Before),
		MissingSeqs: mapSlice(f.MissingSeqs, newSeqRangeJSON),
		Lost: mapSlice(f.Lost, func(l reconcile.LostReceipt) lostReceiptJSON {
			return lostReceiptJSON{Seq: l.Seq, EventID: l.EventID, RequestID: l.RequestID, User: l.User, Qty: l.Qty}
		}),
		Repaired: f.Repaired, RepairError: f.RepairError,
	}
	out.After = newOptionalFiguresJSON(f.After)
	return out
}

// newOptionalFiguresJSON keeps absent figures null.
func newOptionalFiguresJSON(f *reconcile.Figures) *figuresJSON {
	if f == nil {
		return nil
	}
	out := newFiguresJSON(*f)
	return &out
}

func newFiguresJSON(f reconcile.Figures) figuresJSON {
	return figuresJSON{
		RedisStock: f.RedisStock, RedisSeq: f.RedisSeq, RedisBuyers: f.RedisBuyers,
		LedgerStock: f.LedgerStock, LedgerSeq: f.LedgerSeq, LedgerCount: f.LedgerCount, Holders: f.Holders,
		InFlight: f.InFlight, InFlightSum: f.InFlightSum, TruthStock: f.TruthStock, TruthSeq: f.TruthSeq,
		BalanceStock: f.BalanceStock, BalanceSeq: f.BalanceSeq,
	}
}

// recordedRunJSON is one run of GET /v1/reconciliations.
type recordedRunJSON struct {
	ID       int64                 `json:"id"`
	Trigger  string                `json:"trigger"`
	Started  string                `json:"started_at"`
	Finished string                `json:"finished_at"`
	Checked  int                   `json:"checked"`
	Drifts   int                   `json:"drifts"`
	Repaired int                   `json:"repaired"`
	Error    *string               `json:"error"`
	Findings []recordedFindingJSON `json:"findings"`
}

// recordedFindingJSON is a stored finding. Before carries the missing seqs
// the finding named, as the figures were recorded with them.
type recordedFindingJSON struct {
	SKU         string              `json:"sku"`
	Class       string              `json:"class"`
	Detail      string              `json:"detail"`
	Before      recordedFiguresJSON `json:"before"`
	After       *figuresJSON        `json:"after"`
	Repaired    bool                `json:"repaired"`
	RepairError *string             `json:"repair_error"`
}

type recordedFiguresJSON struct {
	figuresJSON
	MissingSeqs []seqRangeJSON `json:"missing_seqs,omitempty"`
}

func newSeqRangeJSON(r reconcile.SeqRange) seqRangeJSON { return seqRangeJSON{From: r.From, To: r.To} }

func newRecordedRunJSON(r reconcile.RecordedRun) recordedRunJSON {
	return recordedRunJSON{
		ID: r.ID, Trigger: r.Trigger, Started: r.Started, Finished: r.Finished,
		Checked: r.Checked, Drifts: r.Drifts, Repaired: r.Repaired, Error: r.Error,
		Findings: mapSlice(r.Findings, func(f reconcile.RecordedFinding) recordedFindingJSON {
			return recordedFindingJSON{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail,
				Before:   recordedFiguresJSON{figuresJSON: newFiguresJSON(f.Before.Figures), MissingSeqs: mapSlice(f.Before.MissingSeqs, newSeqRangeJSON)},
				After:    newOptionalFiguresJSON(f.After),
				Repaired: f.Repaired, RepairError: f.RepairError}
		}),
	}
}

// mapSlice maps in with f, keeping a nil slice nil so that it still encodes
// as null, as the mapped type did.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// reconcile is POST /v1/reconcile: it runs a reconciliation now, of every
// SKU or of {"sku":S}, repairing when {"repair":true}, and answers the report.
func (s *server) reconcile(w http.ResponseWriter, r *http.Request) {
	var req reconcileRequest
	if r.ContentLength != 0 {
		body, err := s.body(w, r)
		if err == nil {
			err = decodeJSON(body, &req)
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	opts := reconcile.Options{Repair: req.Repair, Trigger: "api"}
	if req.SKU != "" {
		if _, err := domain.NewSKUID(req.SKU); err != nil {
			s.fail(w, r, err)
			return
		}
		opts.SKUs = []string{req.SKU}
	}
	rep, err := s.reconciler.Run(r.Context(), opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, newReportJSON(rep))
}

// reconciliations is GET /v1/reconciliations: the newest runs with their
// findings, ?limit=N (default 20, at most 500).
func (s *server) reconciliations(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimitOr(r.URL.Query(), 20, 500)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := s.runs.Runs(r.Context(), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := mapSlice(runs, newRecordedRunJSON)
	if out == nil {
		out = []recordedRunJSON{}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}
