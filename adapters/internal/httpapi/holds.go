package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// HoldService serves the hold routes. *ledger.Holds satisfies it.
type HoldService interface {
	NewReserveCommand(sku, user string, qty int64, requestID string, ttlSeconds *int64) (ledger.ReserveCommand, error)
	Reserve(ctx context.Context, cmd ledger.ReserveCommand) (domain.Hold, error)
	Confirm(ctx context.Context, ref ledger.HoldRef) (domain.Hold, error)
	Cancel(ctx context.Context, ref ledger.HoldRef) (domain.Hold, error)
	Hold(ctx context.Context, ref ledger.HoldRef) (domain.Hold, error)
}

var _ HoldService = (*ledger.Holds)(nil)

// NewHoldJSON renders h.
func NewHoldJSON(h domain.Hold) wire.HoldJSON {
	return wire.HoldJSON{HoldID: h.HoldID, SKU: h.SKU, UserID: h.User, Qty: h.Qty, Status: string(h.Status),
		ExpiresAt: h.ExpiresAt, Seq: h.Seq, OrderID: h.OrderID}
}

// decodeReserve reads a reserve body for sku and validates every field, in
// the order sku, user_id, qty, request_id, ttl_seconds.
func (s *server) decodeReserve(sku, idempotencyKey string, body io.Reader) (ledger.ReserveCommand, error) {
	var b wire.ReserveBody
	data, rerr := io.ReadAll(body)
	given, err := decodePurchaseBody(data, rerr, &b, &b.RequestID)
	if err != nil {
		return ledger.ReserveCommand{}, err
	}
	if b.RequestID, err = purchaseRequestID(b.RequestID, given, idempotencyKey); err != nil {
		return ledger.ReserveCommand{}, err
	}
	if b.Qty == nil {
		if _, err := s.holds.NewReserveCommand(sku, b.UserID, 1, b.RequestID, b.TTLSeconds); err != nil {
			var fe *domain.FieldError
			if errors.As(err, &fe) && (fe.Field == "sku" || fe.Field == "user_id") {
				return ledger.ReserveCommand{}, err
			}
		}
		return ledger.ReserveCommand{}, domain.NewFieldError("qty", errors.New("is required"))
	}
	return s.holds.NewReserveCommand(sku, b.UserID, *b.Qty, b.RequestID, b.TTLSeconds)
}

// reserve answers 201 with the new hold; a retry of its request_id (or
// Idempotency-Key) answers 201 again with the same hold, in its state now,
// and Idempotent-Replayed: true.
func (s *server) reserve(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := s.decodeReserve(r.PathValue("sku"), key, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h, err := s.holds.Reserve(r.Context(), cmd)
	if s.onPurchase != nil {
		s.onPurchase(cmd.SKU, err)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := NewHoldJSON(h)
	out.Remaining = &h.Remaining
	if h.Replayed {
		w.Header()[wire.HeaderReplayed] = headerTrue
	}
	s.writeJSON(w, http.StatusCreated, out)
}

// holdRoute serves a route on one hold: confirm, cancel or show, a method
// expression of HoldService, since routes are listed on an empty server too.
func (s *server) holdRoute(do func(HoldService, context.Context, ledger.HoldRef) (domain.Hold, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ref, err := ledger.NewHoldRef(r.PathValue("sku"), r.PathValue("hold_id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h, err := do(s.holds, r.Context(), ref)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, NewHoldJSON(h))
	}
}
