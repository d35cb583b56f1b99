package httpapi

import (
	"context"
	"io"
	"net/http"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// OrderService serves the order routes. *ledger.Orders satisfies it.
type OrderService interface {
	NewPlaceOrderCommand(orderID, user string, ttlSeconds *int64, lines []ledger.OrderLineInput) (ledger.PlaceOrderCommand, error)
	Place(ctx context.Context, cmd ledger.PlaceOrderCommand) (ledger.Order, error)
	Confirm(ctx context.Context, id domain.OrderID) (ledger.Order, error)
	Cancel(ctx context.Context, id domain.OrderID) (ledger.Order, error)
	Order(ctx context.Context, id domain.OrderID) (ledger.Order, error)
}

var _ OrderService = (*ledger.Orders)(nil)

// NewOrderJSON renders o.
func NewOrderJSON(o ledger.Order) wire.OrderJSON {
	out := wire.OrderJSON{OrderID: o.OrderID, UserID: o.User, Status: string(o.Status), ExpiresAt: o.ExpiresAt,
		Lines: make([]wire.OrderLineJSON, len(o.Lines))}
	for i, h := range o.Lines {
		status := string(h.Status)
		if status == "" {
			status = "none"
		}
		out.Lines[i] = wire.OrderLineJSON{SKU: h.SKU, Qty: h.Qty, HoldID: h.HoldID, Status: status}
	}
	return out
}

// decodePlaceOrder reads an order body and validates every field.
func decodePlaceOrder(orders OrderService, body io.Reader) (ledger.PlaceOrderCommand, error) {
	var b wire.PlaceOrderBody
	if err := decodeJSON(body, &b); err != nil {
		return ledger.PlaceOrderCommand{}, err
	}
	lines := make([]ledger.OrderLineInput, len(b.Lines))
	for i, l := range b.Lines {
		lines[i] = ledger.OrderLineInput{SKU: l.SKU, Qty: l.Qty}
	}
	return orders.NewPlaceOrderCommand(b.OrderID, b.UserID, b.TTLSeconds, lines)
}

// placeOrder answers 201 with the order, or 200 for a retry that found
// every line already reserved.
func (s *server) placeOrder(w http.ResponseWriter, r *http.Request) {
	body, err := s.body(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd, err := decodePlaceOrder(s.orders, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.orders.Place(r.Context(), cmd)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusCreated
	if o.Replayed {
		status = http.StatusOK
	}
	s.writeJSON(w, status, NewOrderJSON(o))
}

// orderRoute serves a route on one order: confirm, cancel or show, a method
// expression of OrderService, since routes are listed on an empty server too.
func (s *server) orderRoute(do func(OrderService, context.Context, domain.OrderID) (ledger.Order, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := domain.NewOrderID(r.PathValue("order_id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		o, err := do(s.orders, r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.writeJSON(w, http.StatusOK, NewOrderJSON(o))
	}
}
