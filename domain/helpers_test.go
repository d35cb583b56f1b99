package domain_test

import (
	"errors"
	"testing"

	"github.com/invledger/invledger/domain"
)

// assertFieldErr checks that err is a validation failure for field with the
// given specific sentinel, reachable through errors.Is and errors.As.
func assertFieldErr(t *testing.T, err error, field string, sentinel error) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected error for field %q, got nil", field)
	}
	if !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("errors.Is(%v, ErrInvalidInput) = false", err)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is(%v, %v) = false", err, sentinel)
	}
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As(%v, *FieldError) = false", err)
	}
	if fe.Field != field {
		t.Errorf("FieldError.Field = %q, want %q", fe.Field, field)
	}
	if fe.Err != sentinel {
		t.Errorf("FieldError.Err = %v, want %v", fe.Err, sentinel)
	}
}
