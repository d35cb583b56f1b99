package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

func TestClientHoldsReserveConfirmCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "c-holds", 3, 1)
	gw := newClient(t, serve(t, st), gwSecret)

	h, err := gw.Reserve(ctx, "c-holds", "u1", 1, "r1", 60)
	if err != nil || h.Status != "held" || h.Remaining == nil || *h.Remaining != 2 || h.Qty != 1 {
		t.Fatalf("Reserve = %+v, %v", h, err)
	}
	again, err := gw.Reserve(ctx, "c-holds", "u1", 1, "r1", 60)
	if err != nil || again.HoldID != h.HoldID || again.ExpiresAt != h.ExpiresAt {
		t.Fatalf("Reserve retried = %+v, %v; want the original hold", again, err)
	}
	if _, err := gw.Reserve(ctx, "c-holds", "u2", 1, "r2", 3601); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("ttl above the maximum = %v", err)
	}
	if c, err := gw.ConfirmHold(ctx, "c-holds", h.HoldID); err != nil || c.Status != "confirmed" {
		t.Fatalf("ConfirmHold = %+v, %v", c, err)
	}
	if _, err := gw.CancelHold(ctx, "c-holds", h.HoldID); !errors.Is(err, domain.ErrHoldConfirmed) {
		t.Fatalf("CancelHold after confirm = %v", err)
	}
	h2, err := gw.Reserve(ctx, "c-holds", "u2", 1, "r2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := gw.CancelHold(ctx, "c-holds", h2.HoldID); err != nil || c.Status != "cancelled" {
		t.Fatalf("CancelHold = %+v, %v", c, err)
	}
	if _, err := gw.ConfirmHold(ctx, "c-holds", h2.HoldID); !errors.Is(err, domain.ErrHoldCancelled) {
		t.Fatalf("ConfirmHold after cancel = %v", err)
	}
	if got, err := gw.Hold(ctx, "c-holds", h2.HoldID); err != nil || got.Status != "cancelled" || got.HoldID != h2.HoldID {
		t.Fatalf("Hold = %+v, %v", got, err)
	}
	if _, err := gw.Hold(ctx, "c-holds", "00000000-0000-4000-8000-000000000000"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown hold = %v", err)
	}
}
