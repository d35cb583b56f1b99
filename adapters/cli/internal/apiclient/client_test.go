package apiclient

import (
	"errors"
	"testing"

	"github.com/invledger/invledger/domain"
)

// TestNewNamesTheFlag: a base URL the client refuses is the --api flag's
// fault, and a missing token is ErrNotConfigured.
func TestNewNamesTheFlag(t *testing.T) {
	t.Setenv("INVLEDGER_API_URL", "")
	t.Setenv("INVLEDGER_API_TOKEN", "")
	var fe *domain.FieldError
	if _, err := New("ftp://127.0.0.1", "secret"); !errors.As(err, &fe) || fe.Field != "api" {
		t.Fatalf("New(ftp) = %v, want a field error naming api", err)
	}
	if _, err := New("http://127.0.0.1:8080", ""); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("New without a token = %v, want ErrNotConfigured", err)
	}
	if c, err := New("http://127.0.0.1:8080/", "secret"); err != nil || c == nil {
		t.Fatalf("New = %v, %v", c, err)
	}
}
