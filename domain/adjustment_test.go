package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/invledger/invledger/domain"
)

// TestAnAdjustmentSaysWhy: an adjustment's reason is required, and its
// refusal says so rather than quote the length rule an empty one meets.
func TestAnAdjustmentSaysWhy(t *testing.T) {
	t.Parallel()
	_, err := domain.NewAdjustmentRequest("sku-1", 5, "", "alice")
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != "reason" || !errors.Is(err, domain.ErrInvalidReason) || !strings.Contains(err.Error(), "is required") {
		t.Errorf("empty reason: %v, want a reason field error saying it is required", err)
	}
	if _, err := domain.NewAdjustmentRequest("sku-1", 5, "recount", "alice"); err != nil {
		t.Errorf("a reason given: %v", err)
	}
}
