package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/invledger/invledger/domain"
)

const (
	pgUniqueViolation = "23505"
	pgCheckViolation  = "23514"
)

// translate maps driver errors that carry domain meaning onto domain sentinels
// and wraps the rest unchanged. A PostgreSQL that cannot be reached, or that
// dropped the connection, is domain.ErrUnavailable: every caller (HTTP 503
// with Retry-After, CLI exit 4) treats it as transient, never as a bug.
func translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case pgUniqueViolation:
			return errors.Join(domain.ErrConflict, err)
		case pgCheckViolation:
			return errors.Join(domain.ErrInvalidInput, err)
		}
	}
	if unreachable(err) && !errors.Is(err, domain.ErrUnavailable) {
		return fmt.Errorf("%w: postgres: %w", domain.ErrUnavailable, err)
	}
	return err
}

// unreachable reports whether err means PostgreSQL could not be talked to:
// a failed connect, a network error or a connection lost mid-query, a
// deadline, or a server refusing work because it is shutting down or
// starting (SQLSTATE class 08 and 57P01-57P03).
func unreachable(err error) bool {
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
		pgErr      *pgconn.PgError
	)
	switch {
	case err == nil:
		return false
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.Timeout(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	return false
}
