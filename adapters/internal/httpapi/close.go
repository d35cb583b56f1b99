package httpapi

import (
	"context"
	"net/http"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// SKUCloser ends sales and retires them. *ledger.Archiver implements it.
type SKUCloser interface {
	CloseSKU(ctx context.Context, sku string) (ledger.CloseResult, error)
	RetireSKU(ctx context.Context, sku string) (ledger.RetireResult, error)
}

var _ SKUCloser = (*ledger.Archiver)(nil)

// closeSKU is POST /v1/skus/{sku}/close: it ends the SKU's sale. Later
// deductions get 409 closed, while retries of earlier requests still get
// their receipts. It answers 200 {"sku","status":"closed","closed_at",
// "already_closed"}, also when the SKU was closed before; 404 not_found for
// an undefined SKU and 409 not_warmed for one that is not in Redis.
func (s *server) closeSKU(w http.ResponseWriter, r *http.Request) {
	res, err := s.closer.CloseSKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, wire.CloseJSON{SKU: res.SKU, Status: "closed", ClosedAt: res.ClosedAt, AlreadyClosed: res.AlreadyClosed})
}

// retireSKU is POST /v1/skus/{sku}/retire: it removes a closed, archived
// SKU from Redis, leaving a tombstone, once a reconciliation finds the
// ledger equal to Redis. It answers 200 {"sku","status":"retired","seq",
// "retired_at","already_retired"}; 404 not_found for an undefined SKU, 409
// conflict when the SKU is open, not archived at its seq, or ahead of the
// ledger, 409 not_warmed when Redis does not hold it.
func (s *server) retireSKU(w http.ResponseWriter, r *http.Request) {
	res, err := s.closer.RetireSKU(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, http.StatusOK, wire.RetireJSON{SKU: res.SKU, Status: string(domain.StatusRetired), Seq: res.Seq,
		RetiredAt: res.RetiredAt, AlreadyRetired: res.AlreadyRetired})
}
