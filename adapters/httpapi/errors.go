package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/invledger/invledger/domain"
)

// Error codes of the {"error":code,"detail":...} body.
const (
	codeInvalidRequest   = "invalid_request"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeSoldOut          = "sold_out"
	codeAlreadyPurchased = "already_purchased"
	codeNotWarmed        = "not_warmed"
	codeClosed           = "closed"
	codeNeedsRestore     = "needs_restore"
	codeRecovering       = "recovering"
	codeUnavailable      = "unavailable"
	codeNotReady         = "not_ready"
	codeCorruptLedger    = "corrupt_ledger"
	codeInternal         = "internal"
	codeSelfApproval     = "self_approval"
	codeInsufficient     = "insufficient_stock"

	detailInternal = "internal error; it has been logged"
)

// errorMapping is how one domain sentinel appears over HTTP.
type errorMapping struct {
	sentinel error
	status   int
	code     string
}

// errorMappings is checked in order with errors.Is. Input errors come first:
// a *domain.FieldError is always the caller's fault, whatever else it wraps.
var errorMappings = []errorMapping{
	{domain.ErrInvalidInput, http.StatusBadRequest, codeInvalidRequest},
	{domain.ErrNotFound, http.StatusNotFound, codeNotFound},
	{domain.ErrSelfApproval, http.StatusForbidden, codeSelfApproval},
	{domain.ErrInsufficientStock, http.StatusConflict, codeInsufficient},
	{domain.ErrSoldOut, http.StatusConflict, codeSoldOut},
	{domain.ErrAlreadyPurchased, http.StatusConflict, codeAlreadyPurchased},
	{domain.ErrNotWarmed, http.StatusConflict, codeNotWarmed},
	{domain.ErrClosed, http.StatusConflict, codeClosed},
	{domain.ErrNeedsRestore, http.StatusConflict, codeNeedsRestore},
	{domain.ErrConflict, http.StatusConflict, codeConflict},
	{domain.ErrRecovering, http.StatusServiceUnavailable, codeRecovering},
}

// fail answers err: a domain sentinel maps to its status and code; anything
// else is logged and answered with 500 and a generic detail, so internals
// (addresses, SQL) never reach the caller.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, m := range errorMappings {
		if !errors.Is(err, m.sentinel) {
			continue
		}
		detail := firstLine(err.Error())
		switch m.sentinel {
		case domain.ErrInvalidInput:
			var fe *domain.FieldError
			if errors.As(err, &fe) {
				detail = fe.Error() // "field: reason"
			} else {
				// e.g. a database CHECK violation: its text is not for callers.
				s.log.WarnContext(r.Context(), "httpapi: invalid input without a field", "method", r.Method, "path", r.URL.Path, "err", err)
				detail = "invalid input"
			}
		case domain.ErrNeedsRestore:
			sku := r.PathValue("sku")
			detail = fmt.Sprintf("redis lost the state of sku %s but the ledger already holds its events, "+
				"so warming it again would double its stock: run `invledger restore-redis --sku %s`", sku, sku)
		case domain.ErrRecovering:
			w.Header().Set("Retry-After", "1")
			detail = "redis restarted and this sku is being checked against the ledger; retry shortly with the same request_id"
		}
		s.writeError(w, m.status, m.code, detail)
		return
	}
	switch {
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this answer.
		s.log.DebugContext(r.Context(), "httpapi: request canceled", "method", r.Method, "path", r.URL.Path, "err", err)
		s.writeError(w, http.StatusServiceUnavailable, codeUnavailable, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		s.log.WarnContext(r.Context(), "httpapi: request timed out", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "1")
		s.writeError(w, http.StatusServiceUnavailable, codeUnavailable, "timed out; retry with the same request_id")
	case errors.Is(err, domain.ErrCorruptLedger):
		s.log.ErrorContext(r.Context(), "httpapi: corrupt ledger", "method", r.Method, "path", r.URL.Path, "err", err)
		s.writeError(w, http.StatusInternalServerError, codeCorruptLedger, "the ledger of this sku does not fold into a consistent state; see the server log")
	default:
		s.log.ErrorContext(r.Context(), "httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		s.writeError(w, http.StatusInternalServerError, codeInternal, detailInternal)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
