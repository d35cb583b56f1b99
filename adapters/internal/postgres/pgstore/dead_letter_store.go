package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/ledger"
)

var _ ledger.DeadLetterStore = (*PostgresDeadLetterStore)(nil)

// PostgresDeadLetterStore reads dead_letters and records how each was
// handled, and by whom, in dead_letter_actions.
type PostgresDeadLetterStore struct {
	pool *pgxpool.Pool
}

// NewPostgresDeadLetterStore returns a store over pool.
func NewPostgresDeadLetterStore(pool *pgxpool.Pool) *PostgresDeadLetterStore {
	return &PostgresDeadLetterStore{pool: pool}
}

const deadLetterColumns = `id, stream, stream_id, event, fields, error, created_at, status, handled_by, handled_at, note`

func scanDeadLetter(row pgx.CollectableRow) (ledger.DeadLetter, error) {
	var d ledger.DeadLetter
	var status string
	err := row.Scan(&d.ID, &d.Stream, &d.StreamID, &d.Event, &d.Fields, &d.Error, &d.CreatedAt, &status, &d.HandledBy, &d.HandledAt, &d.Note)
	d.Status = ledger.DeadLetterStatus(status)
	return d, err
}

// DeadLetters returns up to limit dead letters with id above after, oldest
// first, of status when it is not empty.
func (s *PostgresDeadLetterStore) DeadLetters(ctx context.Context, status ledger.DeadLetterStatus, after int64, limit int) ([]ledger.DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters
		WHERE ($1 = '' OR status = $1) AND id > $2 ORDER BY id LIMIT $3`, string(status), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", translate(err))
	}
	return out, nil
}

// DeadLetter returns dead letter id, or domain.ErrNotFound.
func (s *PostgresDeadLetterStore) DeadLetter(ctx context.Context, id int64) (ledger.DeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = $1`, id)
	if err == nil {
		var d ledger.DeadLetter
		if d, err = pgx.CollectExactlyOneRow(rows, scanDeadLetter); err == nil {
			return d, nil
		}
	}
	return ledger.DeadLetter{}, fmt.Errorf("dead letter %d: %w", id, translate(err))
}

// Handle moves an open dead letter to status by actor with note, and
// records the action, in one transaction. handled is false, and the
// current row is returned, when it was no longer open.
func (s *PostgresDeadLetterStore) Handle(ctx context.Context, id int64, status ledger.DeadLetterStatus, actor, note string) (ledger.DeadLetter, bool, error) {
	action := map[ledger.DeadLetterStatus]string{ledger.DeadLetterReplayed: "replay", ledger.DeadLetterResolved: "resolve"}[status]
	var out ledger.DeadLetter
	handled := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE dead_letters SET status = $2, handled_by = $3, handled_at = now(), note = $4
			WHERE id = $1 AND status = 'open' RETURNING `+deadLetterColumns, id, string(status), actor, note)
		if err != nil {
			return err
		}
		out, err = pgx.CollectExactlyOneRow(rows, scanDeadLetter)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // no longer open
		}
		if err != nil {
			return err
		}
		handled = true
		_, err = tx.Exec(ctx, `INSERT INTO dead_letter_actions (dead_letter_id, action, actor, detail) VALUES ($1, $2, $3, $4)`,
			id, action, actor, note)
		return err
	})
	if err != nil {
		return ledger.DeadLetter{}, false, fmt.Errorf("%s dead letter %d: %w", action, id, translate(err))
	}
	if !handled {
		out, err = s.DeadLetter(ctx, id)
	}
	return out, handled, err
}

// RecordAttempt records a replay of dead letter id by actor that failed,
// with why.
func (s *PostgresDeadLetterStore) RecordAttempt(ctx context.Context, id int64, actor, result string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO dead_letter_actions (dead_letter_id, action, actor, detail) VALUES ($1, 'replay_failed', $2, $3)`,
		id, actor, result)
	if err != nil {
		return fmt.Errorf("record a replay of dead letter %d: %w", id, translate(err))
	}
	return nil
}
