package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

func TestClientOrdersPlaceConfirmCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "c-ord-a", 3, 2)
	st.SKU(t, "c-ord-b", 1, 1)
	gw := newClient(t, serve(t, st), gwSecret)
	lines := []wire.OrderLineBody{{SKU: "c-ord-a", Qty: 2}, {SKU: "c-ord-b", Qty: 1}}

	o, err := gw.PlaceOrder(ctx, "co-1", "u1", 60, lines)
	if err != nil || o.Status != "held" || len(o.Lines) != 2 || o.Lines[1].HoldID == "" {
		t.Fatalf("PlaceOrder = %+v, %v", o, err)
	}
	again, err := gw.PlaceOrder(ctx, "co-1", "u1", 60, lines)
	if err != nil || again.Lines[0].HoldID != o.Lines[0].HoldID {
		t.Fatalf("PlaceOrder retried = %+v, %v", again, err)
	}
	var e *client.Error
	if _, err := gw.PlaceOrder(ctx, "co-2", "u2", 60, lines[1:]); !errors.Is(err, domain.ErrSoldOut) || !errors.As(err, &e) || e.Field != "lines[0]" {
		t.Fatalf("PlaceOrder of a sold-out line = %v", err)
	}
	if _, err := gw.PlaceOrder(ctx, "co-3", "u3", 60, nil); !errors.Is(err, domain.ErrInvalidInput) || !errors.As(err, &e) || e.Field != "lines" {
		t.Fatalf("PlaceOrder of no line = %v", err)
	}
	if c, err := gw.ConfirmOrder(ctx, "co-1"); err != nil || c.Status != "confirmed" || c.Lines[1].Status != "confirmed" {
		t.Fatalf("ConfirmOrder = %+v, %v", c, err)
	}
	if _, err := gw.CancelOrder(ctx, "co-1"); !errors.Is(err, domain.ErrHoldConfirmed) {
		t.Fatalf("CancelOrder of a confirmed order = %v", err)
	}
	if got, err := gw.Order(ctx, "co-2"); err != nil || got.Status != "cancelled" || got.Lines[0].Status != "none" {
		t.Fatalf("Order of the refused order = %+v, %v", got, err)
	}
	if c, err := gw.CancelOrder(ctx, "co-2"); err != nil || c.Status != "cancelled" {
		t.Fatalf("CancelOrder of the refused order = %+v, %v", c, err)
	}
	if _, err := gw.Order(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Order of an unknown id = %v", err)
	}
}
