package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/invledger/invledger/domain"
)

// Transport codes of the {"error":code,"detail":...} body: answers that
// come from HTTP itself rather than from the ledger. The ledger's own codes
// are domain.Code values.
const (
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeMethodNotAllowed = "method_not_allowed"
	codeNotReady         = "not_ready"
	codeRequestTimeout   = "request_timeout"

	detailInternal = "internal error; it has been logged"
)

// statusOf is the HTTP status of a domain code.
func statusOf(code domain.Code) int {
	switch code {
	case domain.CodeInvalidInput:
		return http.StatusBadRequest
	case domain.CodeNotFound:
		return http.StatusNotFound
	case domain.CodeSelfApproval:
		return http.StatusForbidden
	case domain.CodeInsufficientStock, domain.CodeSoldOut, domain.CodeAlreadyPurchased, domain.CodeNotWarmed,
		domain.CodeClosed, domain.CodeRetired, domain.CodeNeedsRestore, domain.CodeConflict,
		domain.CodeHoldExpired, domain.CodeHoldConfirmed, domain.CodeHoldCancelled, domain.CodeHoldReleased:
		return http.StatusConflict
	case domain.CodeRecovering, domain.CodeUnavailable, domain.CodeUnsafeRedis:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers err with the status and code of domain.CodeOf. Server-side
// failures are logged and answered with a generic detail, so internals
// (addresses, SQL) never reach the caller.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errBodyTimeout) {
		s.log.DebugContext(r.Context(), "httpapi: request body timed out", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Connection", "close")
		s.writeError(w, http.StatusRequestTimeout, codeRequestTimeout, errBodyTimeout.Error())
		return
	}
	code := domain.CodeOf(err)
	detail, field := firstLine(err.Error()), ""
	var oe *domain.OrderError
	if errors.As(err, &oe) {
		detail, field = firstLine(oe.Err.Error()), oe.Field
	}
	switch code {
	case domain.CodeInvalidInput:
		var fe *domain.FieldError
		if errors.As(err, &fe) {
			// The field goes in its own member, so the detail does not repeat it.
			detail, field = firstLine(fe.Err.Error()), fe.Field
		} else {
			// e.g. a database CHECK violation: its text is not for callers.
			s.log.WarnContext(r.Context(), "httpapi: invalid input without a field", "method", r.Method, "path", r.URL.Path, "err", err)
			detail = "invalid input"
		}
	case domain.CodeNeedsRestore:
		sku := r.PathValue("sku")
		detail = fmt.Sprintf("redis lost the state of sku %s but the ledger already holds its events, "+
			"so warming it again would double its stock: run `invledger restore-redis --sku %s`", sku, sku)
	case domain.CodeRecovering:
		w.Header().Set("Retry-After", "1")
		detail = "redis restarted and this sku is being checked against the ledger; retry shortly with the same request_id"
	case domain.CodeUnavailable:
		w.Header().Set("Retry-After", "1")
		if errors.Is(err, domain.ErrCorruptRecord) {
			// Not an outage: one record is damaged, and its repair is
			// logged and alerted where it was reported.
			s.log.WarnContext(r.Context(), "httpapi: a corrupt redis record is being rebuilt", "method", r.Method, "path", r.URL.Path, "sku", r.PathValue("sku"), "err", err)
			detail = "what Redis keeps for this request or its sku is damaged and is being rebuilt from the ledger; retry with the same request_id"
			break
		}
		s.log.WarnContext(r.Context(), "httpapi: a server is unavailable", "method", r.Method, "path", r.URL.Path, "sku", r.PathValue("sku"), "err", err)
		detail = "a server this request needs is unavailable or did not answer in time (restarting, failing over or moving data); retry with the same request_id"
	case domain.CodeUnsafeRedis:
		w.Header().Set("Retry-After", "5")
		detail = "sales are stopped: Redis persistence or eviction settings could lose purchases; an operator has been alerted. Retry later with the same request_id"
	case domain.CodeCorruptLedger:
		s.log.ErrorContext(r.Context(), "httpapi: corrupt ledger", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = "the ledger of this sku does not fold into a consistent state; see the server log"
	case domain.CodeInternal:
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			// The client went away; nobody reads this answer.
			s.log.DebugContext(r.Context(), "httpapi: request canceled", "method", r.Method, "path", r.URL.Path, "err", err)
			s.writeError(w, http.StatusServiceUnavailable, string(domain.CodeUnavailable), "request canceled")
			return
		}
		s.log.ErrorContext(r.Context(), "httpapi: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		detail = detailInternal
	}
	status := statusOf(code)
	if status == http.StatusServiceUnavailable && s.unavailable != nil {
		s.unavailable(r.Pattern, code)
	}
	s.writeFieldError(w, status, string(code), detail, field)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
