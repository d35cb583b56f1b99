package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
)

// PostgresSKUStore keeps SKU definitions in the skus table.
type PostgresSKUStore struct {
	pool *pgxpool.Pool
}

// NewPostgresSKUStore returns a store over pool.
func NewPostgresSKUStore(pool *pgxpool.Pool) *PostgresSKUStore {
	return &PostgresSKUStore{pool: pool}
}

// Create stores def. created is false when an identical definition already
// exists; a different definition for the same SKU is domain.ErrConflict.
func (s *PostgresSKUStore) Create(ctx context.Context, def domain.SKUDefinition) (created bool, err error) {
	tag, err := s.pool.Exec(ctx,
		`INSERT INTO skus (sku, initial_stock, per_user_limit) VALUES ($1, $2, $3) ON CONFLICT (sku) DO NOTHING`,
		def.SKU().String(), def.InitialStock(), def.PerUserLimit())
	if err != nil {
		return false, fmt.Errorf("create sku %s: %w", def.SKU(), translate(err))
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	existing, err := s.Get(ctx, def.SKU())
	if err != nil {
		return false, err
	}
	if existing != def {
		return false, fmt.Errorf("%w: sku %s already exists with stock %d and per_user_limit %d",
			domain.ErrConflict, def.SKU(), existing.InitialStock(), existing.PerUserLimit())
	}
	return false, nil
}

// Get returns the SKU's definition, or domain.ErrNotFound.
func (s *PostgresSKUStore) Get(ctx context.Context, sku domain.SKUID) (domain.SKUDefinition, error) {
	var stock, limit int64
	err := s.pool.QueryRow(ctx, `SELECT initial_stock, per_user_limit FROM skus WHERE sku = $1`, sku.String()).
		Scan(&stock, &limit)
	if err != nil {
		return domain.SKUDefinition{}, fmt.Errorf("sku %s: %w", sku, translate(err))
	}
	return domain.NewSKUDefinition(sku, stock, limit)
}

// ClaimStockedEventID returns the event id of the SKU's stocked event,
// recording candidate if none was recorded yet. Every warm of a SKU therefore
// appends its stocked event under one id, and the ledger keeps it once.
func (s *PostgresSKUStore) ClaimStockedEventID(ctx context.Context, sku domain.SKUID, candidate string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx,
		`UPDATE skus SET stocked_event_id = COALESCE(stocked_event_id, $2::uuid) WHERE sku = $1 RETURNING stocked_event_id::text`,
		sku.String(), candidate).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("claim stocked event for %s: %w", sku, translate(err))
	}
	return id, nil
}

// List returns every SKU id in order, for commands that walk all SKUs.
func (s *PostgresSKUStore) List(ctx context.Context) ([]domain.SKUID, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku FROM skus ORDER BY sku`)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.SKUID, error) {
		var s string
		if err := row.Scan(&s); err != nil {
			return domain.SKUID{}, err
		}
		return domain.NewSKUID(s)
	})
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	return ids, nil
}
