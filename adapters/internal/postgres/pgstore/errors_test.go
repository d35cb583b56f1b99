package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/invledger/invledger/domain"
)

// TestTranslateConnectionFailuresAreUnavailable classifies the ways a
// PostgreSQL can be unreachable as domain.ErrUnavailable, and leaves
// other errors alone.
func TestTranslateConnectionFailuresAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want domain.Code
	}{
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, domain.CodeUnavailable},
		{"connection lost", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), domain.CodeUnavailable},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), domain.CodeUnavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, domain.CodeUnavailable},
		{"connection failure", &pgconn.PgError{Code: "08006"}, domain.CodeUnavailable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, domain.CodeConflict},
		{"syntax error", &pgconn.PgError{Code: "42601"}, domain.CodeInternal},
		{"other", errors.New("boom"), domain.CodeInternal},
	} {
		if got := domain.CodeOf(translate(tc.err)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	twice := translate(translate(io.ErrUnexpectedEOF))
	if twice.Error() != translate(io.ErrUnexpectedEOF).Error() {
		t.Errorf("translating twice wraps twice: %q", twice)
	}
}
