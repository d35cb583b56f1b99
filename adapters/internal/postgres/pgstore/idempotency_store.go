package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
)

// PostgresIdempotencyStore keeps the first answer to each write sent with
// an Idempotency-Key, in idempotency_keys.
type PostgresIdempotencyStore struct {
	pool *pgxpool.Pool
	// stale is how long a claim whose request never finished (its process
	// died) blocks the key before a retry may take it over.
	stale time.Duration
}

// NewPostgresIdempotencyStore returns a store over pool.
func NewPostgresIdempotencyStore(pool *pgxpool.Pool) *PostgresIdempotencyStore {
	return &PostgresIdempotencyStore{pool: pool, stale: time.Minute}
}

// Claim takes principal's key for a request with fingerprint; a kept key
// whose fingerprint is one of earlier (the request's as an earlier release
// made it) is the same request. claimed is true when the caller must run
// the request and then Complete or Release the key; otherwise status and
// body are the stored answer. A key used for
// another request is a domain.FieldError naming Idempotency-Key; one whose
// first request is still running is domain.ErrConflict.
func (s *PostgresIdempotencyStore) Claim(ctx context.Context, principal, key, fingerprint string, earlier ...string) (claimed bool, status int, body []byte, err error) {
	// Each turn either decides or finds the row changed under it (taken
	// over, completed, or deleted by the janitor); a few turns settle it.
	for range 5 {
		var again bool
		claimed, status, body, again, err = s.claim(ctx, principal, key, fingerprint, earlier)
		if !again {
			break
		}
	}
	if err != nil {
		return false, 0, nil, fmt.Errorf("idempotency key %q: %w", key, translate(err))
	}
	if !claimed && status == 0 {
		return false, 0, nil, fmt.Errorf("%w: idempotency key %q keeps changing under concurrent requests; retry", domain.ErrConflict, key)
	}
	return claimed, status, body, nil
}

func (s *PostgresIdempotencyStore) claim(ctx context.Context, principal, key, fingerprint string, earlier []string) (claimed bool, status int, body []byte, again bool, err error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO idempotency_keys (principal, key, fingerprint) VALUES ($1, $2, $3)
		ON CONFLICT (principal, key) DO NOTHING`, principal, key, fingerprint)
	if err != nil || tag.RowsAffected() == 1 {
		return err == nil, 0, nil, false, err
	}
	var stored string
	var st *int
	var age time.Duration
	err = s.pool.QueryRow(ctx, `SELECT fingerprint, status, body, clock_timestamp() - created_at FROM idempotency_keys
		WHERE principal = $1 AND key = $2`, principal, key).Scan(&stored, &st, &body, &age)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, 0, nil, true, nil // deleted in between
	case err != nil:
		return false, 0, nil, false, err
	case stored != fingerprint && !slices.Contains(earlier, stored):
		return false, 0, nil, false, domain.NewFieldError("Idempotency-Key", errors.New("was already used for another request; use a new key"))
	case st != nil:
		return false, *st, body, false, nil
	case age < s.stale:
		return false, 0, nil, false, fmt.Errorf("%w: the first request with this Idempotency-Key is still running; retry shortly", domain.ErrConflict)
	}
	tag, err = s.pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = clock_timestamp()
		WHERE principal = $1 AND key = $2 AND status IS NULL AND clock_timestamp() - created_at >= $3`, principal, key, s.stale)
	if err != nil || tag.RowsAffected() == 1 {
		return err == nil, 0, nil, false, err
	}
	return false, 0, nil, true, nil // another retry took it over first
}

// Complete stores the answer of the request that claimed the key.
func (s *PostgresIdempotencyStore) Complete(ctx context.Context, principal, key string, status int, body []byte) error {
	if _, err := s.pool.Exec(ctx, `UPDATE idempotency_keys SET status = $3, body = $4 WHERE principal = $1 AND key = $2`,
		principal, key, status, body); err != nil {
		return fmt.Errorf("idempotency key %q: store the answer: %w", key, translate(err))
	}
	return nil
}

// Release frees a claimed key whose request failed, so that a retry with
// it runs the request again.
func (s *PostgresIdempotencyStore) Release(ctx context.Context, principal, key string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE principal = $1 AND key = $2 AND status IS NULL`,
		principal, key); err != nil {
		return fmt.Errorf("idempotency key %q: release: %w", key, translate(err))
	}
	return nil
}

// DeleteBefore forgets the keys first used before t and returns how many.
func (s *PostgresIdempotencyStore) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, t)
	if err != nil {
		return 0, fmt.Errorf("delete idempotency keys before %s: %w", t.Format(time.RFC3339), translate(err))
	}
	return tag.RowsAffected(), nil
}
