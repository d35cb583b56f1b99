package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/invledger/invledger/ledger"
)

// SKUCloser ends sales. *ledger.Archiver implements it.
type SKUCloser interface {
	CloseSKU(ctx context.Context, sku string) (ledger.CloseResult, error)
}

var _ SKUCloser = (*ledger.Archiver)(nil)

// closeJSON is the answer of POST /v1/skus/{sku}/close. AlreadyClosed is
// true when the SKU was closed before; ClosedAt is then the original time.
type closeJSON struct {
	SKU           string    `json:"sku"`
	Status        string    `json:"status"`
	ClosedAt      time.Time `json:"closed_at"`
	AlreadyClosed bool      `json:"already_closed"`
}

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
	s.writeJSON(w, http.StatusOK, closeJSON{SKU: res.SKU, Status: "closed", ClosedAt: res.ClosedAt, AlreadyClosed: res.AlreadyClosed})
}
