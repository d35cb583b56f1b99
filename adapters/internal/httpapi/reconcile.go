package httpapi

import (
	"context"
	"net/http"

	"github.com/invledger/invledger/adapters/internal/reconcilejson"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Reconciler runs reconciliations. *reconcile.Reconciler implements it.
type Reconciler interface {
	Run(ctx context.Context, opts reconcile.Options) (reconcile.Report, error)
}

var _ Reconciler = (*reconcile.Reconciler)(nil)

// RunLister lists recorded reconciliation runs, newest first: up to limit
// runs with an id below before, or the newest when before is 0.
type RunLister interface {
	Runs(ctx context.Context, before int64, limit int) ([]reconcile.RecordedRun, error)
}

// NewReconcileReportJSON maps r into the body POST /v1/reconcile answers,
// for clients that print a report in the same shape, such as the CLI.
func NewReconcileReportJSON(r reconcile.Report) wire.ReconcileReportJSON {
	return wire.ReconcileReportJSON{
		RunID: r.RunID, Trigger: r.Trigger, Started: r.Started, Finished: r.Finished,
		Checked: r.Checked, Lagging: r.Lagging,
		Drifts: mapSlice(r.Drifts, reconcilejson.NewFinding), Repaired: mapSlice(r.Repaired, reconcilejson.NewFinding),
		Verified: r.Verified, Unverified: r.Unverified,
	}
}

func NewRunJSON(r reconcile.RecordedRun) wire.RunJSON {
	return wire.RunJSON{
		ID: r.ID, Trigger: r.Trigger, Started: r.Started, Finished: r.Finished,
		Checked: r.Checked, DriftCount: r.Drifts, RepairedCount: r.Repaired, Error: r.Error,
		Findings: mapSlice(r.Findings, func(f reconcile.RecordedFinding) wire.RecordedFindingJSON {
			return wire.RecordedFindingJSON{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail,
				Before: wire.RecordedFiguresJSON{FiguresJSON: reconcilejson.NewFigures(f.Before.Figures),
					MissingSeqs: reconcilejson.NewSeqRanges(f.Before.MissingSeqs)},
				After:    reconcilejson.NewOptionalFigures(f.After),
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
	var req wire.ReconcileBody
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
	answer(s, w, r, rep, err, NewReconcileReportJSON)
}

// reconciliations is GET /v1/reconciliations?after=ID&limit=N: recorded
// runs with their findings, newest first, {"runs":[...],"next_after":ID|null};
// after is the next_after of the previous page (the runs older than that
// id), limit 1-500, default 20.
func (s *server) reconciliations(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "after", "limit")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := queryCursorID(q, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryLimitOr(q, 20, 500)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := s.runs.Runs(r.Context(), after, limit+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := wire.RunPageJSON{Runs: mapSlice(runs, NewRunJSON)}
	if len(page.Runs) > limit {
		page.Runs = page.Runs[:limit]
		page.NextAfter = &page.Runs[limit-1].ID
	}
	if page.Runs == nil {
		page.Runs = []wire.RunJSON{}
	}
	s.writeJSON(w, http.StatusOK, page)
}
