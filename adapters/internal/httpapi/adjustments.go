package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// AdjustmentFlow is the approval flow. *ledger.Adjustments implements it.
type AdjustmentFlow interface {
	Request(ctx context.Context, sku string, delta int64, reason, requestedBy string) (domain.Adjustment, error)
	Approve(ctx context.Context, id int64, approver string) (domain.Adjustment, error)
	Reject(ctx context.Context, id int64, approver string) (domain.Adjustment, error)
	List(ctx context.Context, q ledger.AdjustmentQuery) (ledger.AdjustmentPage, error)
}

var _ AdjustmentFlow = (*ledger.Adjustments)(nil)

// NewAdjustmentJSON maps a into its JSON shape, field by field.
func NewAdjustmentJSON(a domain.Adjustment) wire.AdjustmentJSON {
	return wire.AdjustmentJSON{
		ID: a.ID, SKU: a.SKU, Delta: a.Delta, Reason: a.Reason, RequestedBy: a.RequestedBy, RequestedAt: a.RequestedAt,
		Status: string(a.Status), DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt, EventID: a.EventID, Seq: a.Seq,
		Result: a.Result, ReconciliationRunID: a.ReconciliationRunID,
	}
}

// principalName is the requester or approver of an adjustment: the
// principal's name, so the same person can never do both, even with tokens
// of both roles.
func principalName(r *http.Request) string {
	p, _ := PrincipalFrom(r.Context())
	return p.Name
}

// requestAdjustment is POST /v1/adjustments {"sku","delta","reason"}:
// 201 {"id","status":"pending",...}.
func (s *server) requestAdjustment(w http.ResponseWriter, r *http.Request) {
	var req wire.AdjustmentBody
	body, err := s.body(w, r)
	if err == nil {
		err = decodeJSON(body, &req)
	}
	if err == nil && req.Delta == nil {
		err = domain.NewFieldError("delta", domain.ErrInvalidDelta)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	adj, err := s.adjustments.Request(r.Context(), req.SKU, *req.Delta, req.Reason, principalName(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusCreated, NewAdjustmentJSON(adj))
}

// approveAdjustment is POST /v1/adjustments/{id}/approve: 200 with the
// applied adjustment; 403 self_approval; 409 insufficient_stock (marked failed).
func (s *server) approveAdjustment(w http.ResponseWriter, r *http.Request) {
	s.decideAdjustment(w, r, s.adjustments.Approve)
}

// rejectAdjustment is POST /v1/adjustments/{id}/reject: 200; 403 self_approval.
func (s *server) rejectAdjustment(w http.ResponseWriter, r *http.Request) {
	s.decideAdjustment(w, r, s.adjustments.Reject)
}

func (s *server) decideAdjustment(w http.ResponseWriter, r *http.Request, decide func(ctx context.Context, id int64, approver string) (domain.Adjustment, error)) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	adj, err := decide(r.Context(), id, principalName(r))
	answer(s, w, r, adj, err, NewAdjustmentJSON)
}

// NewAdjustmentPageJSON maps p field by field.
func NewAdjustmentPageJSON(p ledger.AdjustmentPage) wire.AdjustmentPageJSON {
	return wire.AdjustmentPageJSON{Adjustments: mapSlice(p.Adjustments, NewAdjustmentJSON), NextAfter: p.NextAfter}
}

// pathID parses the {id} path segment: a positive integer.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, domain.NewFieldError("id", errors.New("must be a positive integer"))
	}
	return id, nil
}

// listAdjustments is GET /v1/adjustments?status=&sku=&after=ID&limit=N:
// adjustments newest first, {"adjustments":[...],"next_after":ID|null};
// limit 1-1000, default 100.
func (s *server) listAdjustments(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r, "status", "sku")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := queryCursorID(q, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.adjustments.List(r.Context(), ledger.AdjustmentQuery{Status: q.Get("status"), SKU: q.Get("sku"), After: after, Limit: limit})
	answer(s, w, r, page, err, NewAdjustmentPageJSON)
}
