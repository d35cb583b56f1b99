package domain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/invledger/invledger/domain"
)

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want domain.Code
	}{
		{nil, domain.CodeOK},
		{domain.NewFieldError("qty", domain.ErrInvalidQuantity), domain.CodeInvalidInput},
		// A field error wins over whatever else it wraps.
		{errors.Join(domain.NewFieldError("sku", domain.ErrInvalidSKU), domain.ErrNotFound), domain.CodeInvalidInput},
		{fmt.Errorf("sku a: %w", domain.ErrNotFound), domain.CodeNotFound},
		{domain.ErrSelfApproval, domain.CodeSelfApproval},
		{domain.ErrInsufficientStock, domain.CodeInsufficientStock},
		{domain.ErrSoldOut, domain.CodeSoldOut},
		{domain.ErrAlreadyPurchased, domain.CodeAlreadyPurchased},
		{domain.ErrNotWarmed, domain.CodeNotWarmed},
		{domain.ErrClosed, domain.CodeClosed},
		{fmt.Errorf("confirm: %w", domain.ErrHoldExpired), domain.CodeHoldExpired},
		{domain.ErrHoldConfirmed, domain.CodeHoldConfirmed},
		{domain.ErrHoldCancelled, domain.CodeHoldCancelled},
		{domain.ErrHoldReleased, domain.CodeHoldReleased},
		{domain.ErrHoldNotFound, domain.CodeNotFound},
		{fmt.Errorf("release: %w", domain.ErrRetired), domain.CodeRetired},
		{domain.ErrNeedsRestore, domain.CodeNeedsRestore},
		{domain.ErrConflict, domain.CodeConflict},
		// A refusal that wraps domain.ErrConflict keeps its own code.
		{fmt.Errorf("%w: %w", domain.ErrConflict, domain.ErrClosed), domain.CodeClosed},
		{domain.ErrRecovering, domain.CodeRecovering},
		{fmt.Errorf("deduct: %w", context.DeadlineExceeded), domain.CodeUnavailable},
		{fmt.Errorf("%w: cannot reach Redis", domain.ErrUnavailable), domain.CodeUnavailable},
		{domain.ErrCorruptLedger, domain.CodeCorruptLedger},
		{context.Canceled, domain.CodeInternal},
		{errors.New("dial tcp: connection refused"), domain.CodeInternal},
	} {
		if got := domain.CodeOf(tc.err); got != tc.want {
			t.Errorf("domain.CodeOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
