package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Reconciler runs reconciliations. *reconcile.Reconciler implements it.
type Reconciler interface {
	Run(ctx context.Context, opts reconcile.Options) (reconcile.Report, error)
}

// RunLister lists recorded reconciliation runs.
type RunLister interface {
	Runs(ctx context.Context, limit int) ([]reconcile.RecordedRun, error)
}

// reconcileRequest is the optional body of POST /v1/reconcile.
type reconcileRequest struct {
	SKU    string `json:"sku"`
	Repair bool   `json:"repair"`
}

// ReconcileRoutes are POST /v1/reconcile (operator) and GET
// /v1/reconciliations (auditor, operator, approver), to mount with
// Config.Routes. POST runs a reconciliation now, of every SKU or of
// {"sku":S}, repairing when {"repair":true}, and answers the report
// {"checked","drifts":[...],"repaired":[...]}. GET lists the newest runs
// with their findings, ?limit=N (default 20, at most 500).
func ReconcileRoutes(rec Reconciler, runs RunLister, maxBody int64, logger *slog.Logger) []Route {
	s := &server{log: cmp.Or(logger, slog.Default()), maxBody: cmp.Or(maxBody, DefaultMaxBodyBytes)}
	post := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		rep, err := rec.Run(r.Context(), opts)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, rep)
	})
	list := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, err := queryLimitOr(r.URL.Query(), 20, 500)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out, err := runs.Runs(r.Context(), limit)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if out == nil {
			out = []reconcile.RecordedRun{}
		}
		s.writeJSON(w, http.StatusOK, map[string]any{"runs": out})
	})
	return []Route{
		{Method: http.MethodPost, Path: "/v1/reconcile", Roles: []Role{RoleOperator}, Handler: post},
		{Method: http.MethodGet, Path: "/v1/reconciliations", Roles: []Role{RoleAuditor, RoleOperator, RoleApprover}, Handler: list},
	}
}
