package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var _ ledger.AdjustmentStore = (*PostgresAdjustmentStore)(nil)

// PostgresAdjustmentStore keeps the adjustments table. Every status change
// is a compare-and-set on the current status, and the table's trigger
// refuses any rewrite of a request.
type PostgresAdjustmentStore struct {
	pool *pgxpool.Pool
}

// NewPostgresAdjustmentStore returns a store over pool.
func NewPostgresAdjustmentStore(pool *pgxpool.Pool) *PostgresAdjustmentStore {
	return &PostgresAdjustmentStore{pool: pool}
}

const adjustmentColumns = `id, sku, delta, reason, requested_by, requested_at, status, decided_by, decided_at,
	event_id::text, seq, result, reconciliation_run_id`

func scanAdjustment(row pgx.CollectableRow) (domain.Adjustment, error) {
	var a domain.Adjustment
	var status string
	err := row.Scan(&a.ID, &a.SKU, &a.Delta, &a.Reason, &a.RequestedBy, &a.RequestedAt, &status, &a.DecidedBy, &a.DecidedAt,
		&a.EventID, &a.Seq, &a.Result, &a.ReconciliationRunID)
	a.Status = domain.AdjustmentStatus(status)
	return a, err
}

func (s *PostgresAdjustmentStore) one(ctx context.Context, query string, args ...any) (domain.Adjustment, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return domain.Adjustment{}, translate(err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, scanAdjustment)
	if err != nil {
		return domain.Adjustment{}, translate(err)
	}
	return a, nil
}

// Create stores a pending adjustment. An undefined SKU is domain.ErrNotFound.
func (s *PostgresAdjustmentStore) Create(ctx context.Context, r domain.AdjustmentRequest) (domain.Adjustment, error) {
	a, err := s.one(ctx, `INSERT INTO adjustments (sku, delta, reason, requested_by)
		SELECT sku, $2, $3, $4 FROM skus WHERE sku = $1 RETURNING `+adjustmentColumns,
		r.SKU().String(), r.Delta(), r.Reason(), r.RequestedBy())
	if err != nil {
		return domain.Adjustment{}, fmt.Errorf("request adjustment of %s: %w", r.SKU(), err)
	}
	return a, nil
}

// Get returns adjustment id, or domain.ErrNotFound.
func (s *PostgresAdjustmentStore) Get(ctx context.Context, id int64) (domain.Adjustment, error) {
	a, err := s.one(ctx, `SELECT `+adjustmentColumns+` FROM adjustments WHERE id = $1`, id)
	if err != nil {
		return domain.Adjustment{}, fmt.Errorf("adjustment %d: %w", id, err)
	}
	return a, nil
}

// Decide moves a pending adjustment to status (approved or rejected) by
// decidedBy, recording eventID for an approval. decided is false, and the
// current row is returned, when it was no longer pending.
func (s *PostgresAdjustmentStore) Decide(ctx context.Context, id int64, status domain.AdjustmentStatus, decidedBy, eventID string) (domain.Adjustment, bool, error) {
	var event *string
	if eventID != "" {
		event = &eventID
	}
	a, err := s.one(ctx, `UPDATE adjustments SET status = $2, decided_by = $3, decided_at = now(), event_id = $4
		WHERE id = $1 AND status = 'pending' RETURNING `+adjustmentColumns, id, string(status), decidedBy, event)
	if err == nil {
		return a, true, nil
	}
	if !errors.Is(err, domain.ErrNotFound) {
		return domain.Adjustment{}, false, fmt.Errorf("decide adjustment %d: %w", id, err)
	}
	current, getErr := s.Get(ctx, id)
	if getErr != nil {
		return domain.Adjustment{}, false, getErr
	}
	return current, false, nil
}

// Settle locks adjustment id (SELECT ... FOR UPDATE, in one transaction)
// and, while it is still approved, calls settle under the lock and stores
// its Settlement. Everything settle needs runs outside PostgreSQL, so a
// waiting Settle holds one connection and the holder needs no second one.
func (s *PostgresAdjustmentStore) Settle(ctx context.Context, id int64, settle func(ctx context.Context, adj domain.Adjustment) (*ledger.Settlement, error)) (domain.Adjustment, error) {
	var out domain.Adjustment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+adjustmentColumns+` FROM adjustments WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return translate(err)
		}
		if out, err = pgx.CollectExactlyOneRow(rows, scanAdjustment); err != nil {
			return translate(err)
		}
		if out.Status != domain.AdjustmentApproved {
			return nil // settled before: the stored outcome
		}
		st, err := settle(ctx, out)
		if err != nil || st == nil {
			return err
		}
		rows, err = tx.Query(ctx, `UPDATE adjustments SET status = $2, seq = $3, result = $4,
			decided_by = COALESCE(NULLIF($5, ''), decided_by), decided_at = CASE WHEN $5 = '' THEN decided_at ELSE now() END
			WHERE id = $1 RETURNING `+adjustmentColumns, id, string(st.Status), st.Seq, st.Result, st.DecidedBy)
		if err != nil {
			return translate(err)
		}
		out, err = pgx.CollectExactlyOneRow(rows, scanAdjustment)
		return translate(err)
	})
	if err != nil {
		return domain.Adjustment{}, fmt.Errorf("settle adjustment %d: %w", id, err)
	}
	return out, nil
}

// LinkReconciliation records the reconciliation run that checked the SKU
// right after the adjustment was applied.
func (s *PostgresAdjustmentStore) LinkReconciliation(ctx context.Context, id, runID int64) (domain.Adjustment, error) {
	a, err := s.one(ctx, `UPDATE adjustments SET reconciliation_run_id = $2 WHERE id = $1 RETURNING `+adjustmentColumns, id, runID)
	if err != nil {
		return domain.Adjustment{}, fmt.Errorf("link reconciliation to adjustment %d: %w", id, err)
	}
	return a, nil
}

// List returns up to q.Limit adjustments, newest first, filtered by status
// and sku when they are not empty, with id below q.After when it is not 0.
func (s *PostgresAdjustmentStore) List(ctx context.Context, q ledger.AdjustmentQuery) ([]domain.Adjustment, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+adjustmentColumns+` FROM adjustments
		WHERE ($1 = '' OR status = $1) AND ($2 = '' OR sku = $2) AND ($3::bigint = 0 OR id < $3)
		ORDER BY id DESC LIMIT $4`, q.Status, q.SKU, q.After, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("list adjustments: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, scanAdjustment)
	if err != nil {
		return nil, fmt.Errorf("list adjustments: %w", translate(err))
	}
	return out, nil
}

// CountPending counts adjustments waiting for a decision.
func (s *PostgresAdjustmentStore) CountPending(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM adjustments WHERE status = 'pending'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending adjustments: %w", translate(err))
	}
	return n, nil
}
