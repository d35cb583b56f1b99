package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// AdjustmentFlow is the approval flow. *ledger.Adjustments implements it.
type AdjustmentFlow interface {
	Request(ctx context.Context, sku string, delta int64, reason, requestedBy string) (domain.Adjustment, error)
	Approve(ctx context.Context, id int64, approver string) (domain.Adjustment, error)
	Reject(ctx context.Context, id int64, approver string) (domain.Adjustment, error)
	List(ctx context.Context, status, sku string, limit int) ([]domain.Adjustment, error)
}

var _ AdjustmentFlow = (*ledger.Adjustments)(nil)

type adjustmentRequest struct {
	SKU    string `json:"sku"`
	Delta  *int64 `json:"delta"`
	Reason string `json:"reason"`
}

// AdjustmentRoutes are the approval flow's endpoints, to mount with
// Config.Routes. The principal's name is the requester or approver, so the
// same person can never do both, even with tokens of both roles:
//   - POST /v1/adjustments {"sku","delta","reason"} (operator): 201 {"id","status":"pending",...}
//   - POST /v1/adjustments/{id}/approve (approver): 200 with the applied
//     adjustment; 403 self_approval; 409 insufficient_stock (marked failed)
//   - POST /v1/adjustments/{id}/reject (approver): 200; 403 self_approval
//   - GET /v1/adjustments?status=&sku=&limit= (auditor, operator, approver)
func AdjustmentRoutes(flow AdjustmentFlow, maxBody int64, logger *slog.Logger) []Route {
	s := &server{log: cmp.Or(logger, slog.Default()), maxBody: cmp.Or(maxBody, DefaultMaxBodyBytes)}
	principal := func(r *http.Request) string {
		p, _ := PrincipalFrom(r.Context())
		return p.Name
	}
	request := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req adjustmentRequest
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
		adj, err := flow.Request(r.Context(), req.SKU, *req.Delta, req.Reason, principal(r))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusCreated, adj)
	})
	decide := func(f func(ctx context.Context, id int64, approver string) (domain.Adjustment, error)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil || id < 1 {
				s.writeError(w, http.StatusBadRequest, codeInvalidRequest, "id: must be a positive integer")
				return
			}
			adj, err := f(r.Context(), id, principal(r))
			if err != nil {
				s.fail(w, r, err)
				return
			}
			s.writeJSON(w, http.StatusOK, adj)
		})
	}
	list := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := queryLimitOr(q, 100, 1000)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		out, err := flow.List(r.Context(), q.Get("status"), q.Get("sku"), limit)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if out == nil {
			out = []domain.Adjustment{}
		}
		s.writeJSON(w, http.StatusOK, map[string]any{"adjustments": out})
	})
	return []Route{
		{Method: http.MethodPost, Path: "/v1/adjustments", Roles: []Role{RoleOperator}, Handler: request},
		{Method: http.MethodPost, Path: "/v1/adjustments/{id}/approve", Roles: []Role{RoleApprover}, Handler: decide(flow.Approve)},
		{Method: http.MethodPost, Path: "/v1/adjustments/{id}/reject", Roles: []Role{RoleApprover}, Handler: decide(flow.Reject)},
		{Method: http.MethodGet, Path: "/v1/adjustments", Roles: []Role{RoleAuditor, RoleOperator, RoleApprover}, Handler: list},
	}
}
