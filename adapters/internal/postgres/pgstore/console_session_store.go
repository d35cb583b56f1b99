package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresConsoleSessionStore records console sign-ins and sign-outs in
// console_sessions, so every serve process refuses a signed-out cookie.
type PostgresConsoleSessionStore struct {
	pool *pgxpool.Pool
}

// NewPostgresConsoleSessionStore returns a store over pool.
func NewPostgresConsoleSessionStore(pool *pgxpool.Pool) *PostgresConsoleSessionStore {
	return &PostgresConsoleSessionStore{pool: pool}
}

// Start records session id of name with role, and deletes the sessions
// started before forgetBefore: their cookies are refused by age anyway.
func (s *PostgresConsoleSessionStore) Start(ctx context.Context, id, name, role string, forgetBefore time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_sessions WHERE started_at < $1`, forgetBefore); err != nil {
		return fmt.Errorf("console sessions: %w", translate(err))
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO console_sessions (id, name, role) VALUES ($1, $2, $3)`, id, name, role); err != nil {
		return fmt.Errorf("console session start: %w", translate(err))
	}
	return nil
}

// Active reports whether session id was started and not ended.
func (s *PostgresConsoleSessionStore) Active(ctx context.Context, id string) (bool, error) {
	var ended *time.Time
	err := s.pool.QueryRow(ctx, `SELECT ended_at FROM console_sessions WHERE id = $1`, id).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("console session: %w", translate(err))
	}
	return ended == nil, nil
}

// End marks session id signed out; ending it again changes nothing.
func (s *PostgresConsoleSessionStore) End(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE console_sessions SET ended_at = clock_timestamp() WHERE id = $1 AND ended_at IS NULL`, id); err != nil {
		return fmt.Errorf("console session end: %w", translate(err))
	}
	return nil
}
