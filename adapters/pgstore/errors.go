package pgstore

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/invledger/invledger/domain"
)

const (
	pgUniqueViolation = "23505"
	pgCheckViolation  = "23514"
)

// translate maps driver errors that carry domain meaning onto domain sentinels
// and wraps the rest unchanged.
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
	return err
}
