package domain_test

import (
	"errors"
	"testing"

	"github.com/invledger/invledger/domain"
)

func TestOrderStatusOf(t *testing.T) {
	h, c, x, e, r := domain.HoldHeld, domain.HoldConfirmed, domain.HoldCancelled, domain.HoldExpired, domain.HoldReleased
	for _, tc := range []struct {
		lines []domain.HoldStatus
		want  domain.OrderStatus
	}{
		{[]domain.HoldStatus{h, h}, domain.OrderHeld},
		{[]domain.HoldStatus{c, c}, domain.OrderConfirmed},
		{[]domain.HoldStatus{c, h}, domain.OrderPartial},
		{[]domain.HoldStatus{h, x}, domain.OrderPartial},
		{[]domain.HoldStatus{c, e}, domain.OrderPartial},
		{[]domain.HoldStatus{x, e}, domain.OrderExpired},
		{[]domain.HoldStatus{x, ""}, domain.OrderCancelled},
		{[]domain.HoldStatus{e, ""}, domain.OrderExpired},
		{[]domain.HoldStatus{r, c}, domain.OrderPartial},
		{[]domain.HoldStatus{r, e}, domain.OrderExpired},
		{[]domain.HoldStatus{r, r}, domain.OrderCancelled},
	} {
		if got := domain.OrderStatusOf(tc.lines); got != tc.want {
			t.Errorf("OrderStatusOf(%v) = %s, want %s", tc.lines, got, tc.want)
		}
	}
}

func TestOrderRefusalsNameTheirField(t *testing.T) {
	cfg := domain.OrderConfig{}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil || cfg.MaxLines != domain.DefaultOrderMaxLines {
		t.Fatalf("defaults %+v: %v", cfg, err)
	}
	if err := (domain.OrderConfig{MaxLines: -1}).Validate(); err == nil {
		t.Error("MaxLines -1 accepted")
	}
	var fe *domain.FieldError
	if err := cfg.CheckLineCount(0); !errors.Is(err, domain.ErrEmptyOrder) || !errors.As(err, &fe) || fe.Field != "lines" {
		t.Errorf("no line: %v", err)
	}
	if err := cfg.CheckLineCount(21); !errors.Is(err, domain.ErrTooManyLines) || !errors.As(err, &fe) || fe.Field != "lines" {
		t.Errorf("21 lines: %v", err)
	}
	if err := cfg.CheckLineCount(20); err != nil {
		t.Errorf("20 lines: %v", err)
	}
	var oe *domain.OrderError
	if err := domain.LineError(2, "sku-x", domain.ErrSoldOut); !errors.Is(err, domain.ErrSoldOut) || !errors.As(err, &oe) || oe.Field != "lines[2]" ||
		domain.CodeOf(err) != domain.CodeSoldOut {
		t.Errorf("LineError = %v", err)
	}
	if err := domain.LineError(1, "sku-x", domain.NewFieldError("qty", domain.ErrInvalidQuantity)); !errors.As(err, &fe) || fe.Field != "lines[1].qty" {
		t.Errorf("LineError of a field error = %v", err)
	}
	if _, err := domain.NewOrderID(""); !errors.As(err, &fe) || fe.Field != "order_id" {
		t.Errorf("empty order id: %v", err)
	}
}
