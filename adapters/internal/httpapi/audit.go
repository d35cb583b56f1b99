package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Auditor answers the audit queries. *ledger.Auditor implements it. They
// answer from the ledger, not from Redis, for the auditor, operator and
// approver roles. A malformed or unknown query parameter is 400
// invalid_request naming it; a SKU never defined is 404.
type Auditor interface {
	History(ctx context.Context, q ledger.HistoryQuery) (ledger.HistoryPage, error)
	Buyers(ctx context.Context, q ledger.BuyersQuery) (ledger.BuyersView, error)
	BalanceAt(ctx context.Context, sku string, at time.Time) (ledger.StockAt, error)
	UserEvents(ctx context.Context, q ledger.UserQuery) (ledger.UserPage, error)
	Operations(ctx context.Context, q ledger.OperationQuery) (ledger.OperationPage, error)
}

var _ Auditor = (*ledger.Auditor)(nil)

// NewAuditEntryJSON maps e into its JSON shape, field by field.
func NewAuditEntryJSON(e ledger.AuditEntry) wire.AuditEntryJSON {
	return wire.AuditEntryJSON{
		EventJSON: wire.EventJSON{
			EventID: e.EventID, SKU: e.SKU, Seq: e.Seq, Type: string(e.Type), Delta: e.Delta, Qty: e.Qty,
			BalanceAfter: e.BalanceAfter, UserID: e.UserID, RequestID: e.RequestID, Actor: e.Actor, Reason: e.Reason,
			OccurredAt: e.OccurredAt, HoldID: e.HoldID, OrderID: e.OrderID, ExpiresAt: e.ExpiresAt,
		},
		RecordedAt: e.RecordedAt, StreamID: e.StreamID, PrevHash: e.PrevHash, Hash: e.Hash,
	}
}

// NewHistoryPageJSON maps p into its JSON shape, field by field.
func NewHistoryPageJSON(p ledger.HistoryPage) wire.HistoryPageJSON {
	return wire.HistoryPageJSON{SKU: p.SKU, Events: mapSlice(p.Events, NewAuditEntryJSON), NextAfter: p.NextAfter}
}

// NewUserPageJSON maps p into its JSON shape, field by field.
func NewUserPageJSON(p ledger.UserPage) wire.UserPageJSON {
	return wire.UserPageJSON{UserID: p.UserID, Events: mapSlice(p.Events, NewAuditEntryJSON), NextAfter: p.NextAfter}
}

// NewBuyersJSON maps v into its JSON shape, field by field.
func NewBuyersJSON(v ledger.BuyersView) wire.BuyersJSON {
	return wire.BuyersJSON{SKU: v.SKU, Buyers: mapSlice(v.Buyers, func(h ledger.Holding) wire.HoldingJSON {
		return wire.HoldingJSON{UserID: h.UserID, Qty: h.Qty}
	}), NextAfter: v.NextAfter}
}

// NewStockAtJSON maps s into its JSON shape, field by field.
func NewStockAtJSON(s ledger.StockAt) wire.StockAtJSON {
	return wire.StockAtJSON{SKU: s.SKU, At: s.At, Stock: s.Stock}
}

// skuEvents is GET /v1/skus/{sku}/events?after=SEQ&limit=N: the SKU's
// ledger rows with seq above after, in seq order, {"sku","events":[...],
// "next_after":SEQ|null}; limit 1-1000, default 100.
func (s *server) skuEvents(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := queryCursor(q, "after", 0, "the next_after of a previous page: a seq, 0 or more")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.auditor.History(r.Context(), ledger.HistoryQuery{SKU: r.PathValue("sku"), After: after, Limit: limit})
	answer(s, w, r, page, err, NewHistoryPageJSON)
}

// balanceAt is GET /v1/skus/{sku}/balance?at=RFC3339: the stock at that
// instant, {"sku","at","stock"}; 0 before the SKU was stocked.
func (s *server) balanceAt(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "at")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !q.Has("at") {
		s.fail(w, r, domain.NewFieldError("at", errors.New("is required: ?at=2026-05-01T12:00:00Z")))
		return
	}
	at, err := ledger.ParseInstant(q.Get("at"), time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.auditor.BalanceAt(r.Context(), r.PathValue("sku"), at)
	answer(s, w, r, res, err, NewStockAtJSON)
}

// buyers is GET /v1/skus/{sku}/buyers?after=USER&limit=N: who holds units
// now, after releases, ordered by user id, {"sku","buyers":[{"user_id",
// "qty"}],"next_after":USER|null}; after is the last user id of the
// previous page, limit 1-1000, default 100.
func (s *server) buyers(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.auditor.Buyers(r.Context(), ledger.BuyersQuery{SKU: r.PathValue("sku"), After: q.Get("after"), Limit: limit})
	answer(s, w, r, res, err, NewBuyersJSON)
}

// userPurchases is GET /v1/users/{user_id}/purchases?after=CURSOR&limit=N:
// the user's purchases and releases across SKUs by time,
// {"user_id","events":[...],"next_after":CURSOR|null}.
func (s *server) userPurchases(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.auditor.UserEvents(r.Context(), ledger.UserQuery{User: r.PathValue("user_id"), After: q.Get("after"), Limit: limit})
	answer(s, w, r, page, err, NewUserPageJSON)
}

// NewOperationJSON maps op into its JSON shape, field by field.
func NewOperationJSON(op domain.Operation) wire.OperationJSON {
	return wire.OperationJSON{ID: op.ID, SKU: op.SKU, Action: string(op.Action), Actor: op.Actor, At: op.At, Detail: op.Detail}
}

// NewOperationPageJSON maps p into its JSON shape, field by field.
func NewOperationPageJSON(p ledger.OperationPage) wire.OperationPageJSON {
	return wire.OperationPageJSON{SKU: p.SKU, Operations: mapSlice(p.Operations, NewOperationJSON), NextAfter: p.NextAfter}
}

// skuOperations is GET /v1/skus/{sku}/operations?after=ID&limit=N: who
// created, warmed, closed, archived, restored, repaired or rebuilt the SKU,
// oldest first, {"sku","operations":[...],"next_after":ID|null}.
func (s *server) skuOperations(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := queryCursorID(q, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.auditor.Operations(r.Context(), ledger.OperationQuery{SKU: r.PathValue("sku"), After: after, Limit: limit})
	answer(s, w, r, page, err, NewOperationPageJSON)
}

// queryParams parses the query string and refuses parameters other than
// allowed, given twice or empty, so a misspelt ?limt=5 is an error rather
// than a silently ignored filter.
func queryParams(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, domain.NewFieldError("query", errors.New("is not a valid URL query string"))
	}
	for name, values := range q {
		switch {
		case !slices.Contains(allowed, name):
			known := "none"
			if len(allowed) > 0 {
				known = strings.Join(allowed, ", ")
			}
			return nil, domain.NewFieldError(name, errors.New("is not a parameter of this endpoint; known: "+known))
		case len(values) > 1:
			return nil, domain.NewFieldError(name, errors.New("is given more than once"))
		case values[0] == "":
			return nil, domain.NewFieldError(name, errors.New("is empty: give a value or leave the parameter out"))
		}
	}
	return q, nil
}

// pageQuery parses the query of a paged list: after and limit (queryLimit)
// beside the filters it names; any other, repeated or empty parameter is
// refused, as queryParams does.
func pageQuery(r *http.Request, filters ...string) (url.Values, int, error) {
	q, err := queryParams(r, append(filters, "after", "limit")...)
	if err != nil {
		return nil, 0, err
	}
	limit, err := queryLimit(q)
	return q, limit, err
}

// answer writes toJSON(v) with 200, or fails with err.
func answer[T, U any](s *server, w http.ResponseWriter, r *http.Request, v T, err error, toJSON func(T) U) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, toJSON(v))
}

// queryInt parses the integer parameter name; absent is 0.
func queryInt(q url.Values, name string) (int64, error) {
	if !q.Has(name) {
		return 0, nil
	}
	n, err := strconv.ParseInt(q.Get(name), 10, 64)
	if err != nil {
		return 0, domain.NewFieldError(name, errors.New("must be an integer"))
	}
	return n, nil
}

// queryCursorID parses the id cursor name: absent is 0 (the first page),
// given it must be a positive integer, so a cursor outside the bigint ids
// PostgreSQL hands out is refused rather than answered with an empty page.
func queryCursorID(q url.Values, name string) (int64, error) {
	return queryCursor(q, name, 1, "the next_after of a previous page: a positive integer")
}

// queryCursor parses the integer cursor name: absent is 0, given it must
// be at least least, and what must says otherwise.
func queryCursor(q url.Values, name string, least int64, must string) (int64, error) {
	n, err := queryInt(q, name)
	if err == nil && q.Has(name) && n < least {
		err = domain.NewFieldError(name, errors.New("must be "+must))
	}
	return n, err
}

// queryLimitOr parses ?limit: def when absent, else an integer in 1..most.
func queryLimitOr(q url.Values, def, most int64) (int, error) {
	if !q.Has("limit") {
		return int(def), nil
	}
	n, err := queryInt(q, "limit")
	if err == nil && (n < 1 || n > most) {
		err = domain.NewFieldError("limit", errors.New("must be an integer from 1 to "+strconv.FormatInt(most, 10)))
	}
	return int(n), err
}

// queryLimit parses ?limit. Absent is 0, which the ledger reads as its
// default; given, it must be 1 to ledger.MaxAuditLimit.
func queryLimit(q url.Values) (int, error) {
	if !q.Has("limit") {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil {
		// Not an integer, or one beyond int: the error states the range.
		return 0, ledger.CheckAuditLimit("limit", 0)
	}
	return n, ledger.CheckAuditLimit("limit", n)
}
