package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var _ ledger.OperationLog = (*PostgresOperationStore)(nil)

// PostgresOperationStore keeps the operations audit trail, an append-only
// table (its trigger refuses UPDATE and DELETE).
type PostgresOperationStore struct {
	pool *pgxpool.Pool
}

// NewPostgresOperationStore returns a store over pool.
func NewPostgresOperationStore(pool *pgxpool.Pool) *PostgresOperationStore {
	return &PostgresOperationStore{pool: pool}
}

// Record appends op; its ID and At are assigned here.
func (s *PostgresOperationStore) Record(ctx context.Context, op domain.Operation) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO operations (sku, action, actor, detail) VALUES ($1, $2, $3, $4)`,
		op.SKU, string(op.Action), op.Actor, op.Detail)
	if err != nil {
		return fmt.Errorf("record %s of %s by %s: %w", op.Action, op.SKU, op.Actor, translate(err))
	}
	return nil
}

// Operations returns up to limit of the SKU's operations with id above
// after, oldest first.
func (s *PostgresOperationStore) Operations(ctx context.Context, sku string, after int64, limit int) ([]domain.Operation, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, sku, action, actor, at, detail FROM operations
		WHERE sku = $1 AND id > $2 ORDER BY id LIMIT $3`, sku, after, limit)
	if err != nil {
		return nil, fmt.Errorf("operations of %s: %w", sku, translate(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.Operation, error) {
		var op domain.Operation
		var action string
		err := row.Scan(&op.ID, &op.SKU, &action, &op.Actor, &op.At, &op.Detail)
		op.Action = domain.OperationAction(action)
		return op, err
	})
	if err != nil {
		return nil, fmt.Errorf("operations of %s: %w", sku, translate(err))
	}
	return out, nil
}
