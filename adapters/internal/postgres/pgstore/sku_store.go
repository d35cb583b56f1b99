package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

var (
	_ ledger.SKUStore       = (*PostgresSKUStore)(nil)
	_ ledger.SKUDefinitions = (*PostgresSKUStore)(nil)
	_ ledger.SKUCatalog     = (*PostgresSKUStore)(nil)
	_ ledger.SKUPager       = (*PostgresSKUStore)(nil)
	_ reconcile.SKULister   = (*PostgresSKUStore)(nil)
)

// PostgresSKUStore keeps SKU definitions and their lifecycle (closing, and
// the buyers archive summary joined from buyer_archives) in the skus table.
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
	ids, err := pgx.CollectRows(rows, scanSKUID)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	return ids, nil
}

// Page returns up to limit SKUs after the id after, in byte order of their
// ids whatever the database's collation, each with its balances row: one
// query for the page.
func (s *PostgresSKUStore) Page(ctx context.Context, after string, limit int) ([]ledger.SKUListing, error) {
	rows, err := s.pool.Query(ctx, `
SELECT s.sku, s.initial_stock, s.per_user_limit, s.retired_at IS NOT NULL, b.balance, b.last_seq, b.updated_at
FROM skus s LEFT JOIN balances b ON b.sku = s.sku
WHERE s.sku COLLATE "C" > $1 ORDER BY s.sku COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	listings, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.SKUListing, error) {
		var (
			sku          string
			stock, limit int64
			retired      bool
			balance, seq *int64
			updatedAt    *time.Time
		)
		if err := row.Scan(&sku, &stock, &limit, &retired, &balance, &seq, &updatedAt); err != nil {
			return ledger.SKUListing{}, err
		}
		id, err := domain.NewSKUID(sku)
		if err != nil {
			return ledger.SKUListing{}, err
		}
		l := ledger.SKUListing{Retired: retired}
		if l.Definition, err = domain.NewSKUDefinition(id, stock, limit); err != nil {
			return ledger.SKUListing{}, err
		}
		if balance != nil {
			l.Balance = &domain.LedgerBalance{Stock: *balance, LastSeq: *seq, UpdatedAt: *updatedAt}
		}
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	return listings, nil
}

// scanSKUID reads a row of one sku column, validating the id.
func scanSKUID(row pgx.CollectableRow) (domain.SKUID, error) {
	var sku string
	if err := row.Scan(&sku); err != nil {
		return domain.SKUID{}, err
	}
	return domain.NewSKUID(sku)
}

// skuRecordQuery reads SKUs with their latest archive version.
const skuRecordQuery = `
SELECT s.sku, s.initial_stock, s.per_user_limit, s.closed_at, s.retired_at, s.retired_seq, s.reopened_at,
       a.seq, a.buyers_count, a.units, a.archived_at
FROM skus s LEFT JOIN LATERAL (
    SELECT seq, buyers_count, units, archived_at FROM buyer_archives
    WHERE sku = s.sku ORDER BY version DESC LIMIT 1) a ON true`

// Record returns the SKU's definition and lifecycle, or domain.ErrNotFound.
func (s *PostgresSKUStore) Record(ctx context.Context, sku domain.SKUID) (ledger.SKURecord, error) {
	rows, err := s.pool.Query(ctx, skuRecordQuery+` WHERE s.sku = $1`, sku.String())
	if err != nil {
		return ledger.SKURecord{}, fmt.Errorf("sku %s: %w", sku, translate(err))
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanSKURecord)
	if err != nil {
		return ledger.SKURecord{}, fmt.Errorf("sku %s: %w", sku, translate(err))
	}
	return rec, nil
}

// Records returns every SKU's definition and lifecycle, ordered by SKU.
func (s *PostgresSKUStore) Records(ctx context.Context) ([]ledger.SKURecord, error) {
	rows, err := s.pool.Query(ctx, skuRecordQuery+` ORDER BY s.sku`)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	recs, err := pgx.CollectRows(rows, scanSKURecord)
	if err != nil {
		return nil, fmt.Errorf("list skus: %w", translate(err))
	}
	return recs, nil
}

func scanSKURecord(row pgx.CollectableRow) (ledger.SKURecord, error) {
	var (
		sku          string
		stock, limit int64
		closedAt     *time.Time
		retiredAt    *time.Time
		retiredSeq   *int64
		reopenedAt   *time.Time
		seq, buyers  *int64
		units        *int64
		archivedAt   *time.Time
	)
	if err := row.Scan(&sku, &stock, &limit, &closedAt, &retiredAt, &retiredSeq, &reopenedAt,
		&seq, &buyers, &units, &archivedAt); err != nil {
		return ledger.SKURecord{}, err
	}
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return ledger.SKURecord{}, err
	}
	def, err := domain.NewSKUDefinition(id, stock, limit)
	if err != nil {
		return ledger.SKURecord{}, err
	}
	rec := ledger.SKURecord{Definition: def}
	if closedAt != nil {
		rec.ClosedAt = *closedAt
	}
	if retiredAt != nil {
		rec.Retired = &ledger.Retirement{Seq: *retiredSeq, At: *retiredAt}
	}
	if reopenedAt != nil {
		rec.ReopenedAt = *reopenedAt
	}
	if archivedAt != nil {
		rec.Archive = &ledger.ArchiveSummary{Seq: *seq, Buyers: int(*buyers), Units: *units, ArchivedAt: *archivedAt}
	}
	return rec, nil
}

// RecordClosed stores at as the SKU's closing time unless one is stored,
// and returns the stored one. An undefined SKU is domain.ErrNotFound.
func (s *PostgresSKUStore) RecordClosed(ctx context.Context, sku domain.SKUID, at time.Time) (time.Time, error) {
	var stored time.Time
	err := s.pool.QueryRow(ctx, `UPDATE skus SET closed_at = COALESCE(closed_at, $2) WHERE sku = $1 RETURNING closed_at`,
		sku.String(), at).Scan(&stored)
	if err != nil {
		return time.Time{}, fmt.Errorf("record close of %s: %w", sku, translate(err))
	}
	return stored, nil
}

// ClosedUnarchived lists the SKUs closed at least olderThan ago, by the
// database's clock, whose buyers are not archived yet.
func (s *PostgresSKUStore) ClosedUnarchived(ctx context.Context, olderThan time.Duration) ([]domain.SKUID, error) {
	return s.listIDs(ctx, `
SELECT s.sku FROM skus s
WHERE s.closed_at <= now() - $1::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM buyer_archives a WHERE a.sku = s.sku)
ORDER BY s.sku`, olderThan.Microseconds())
}

// listIDs runs query, which selects SKU ids, for the closed-SKU lists.
func (s *PostgresSKUStore) listIDs(ctx context.Context, query string, args ...any) ([]domain.SKUID, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list closed skus: %w", translate(err))
	}
	ids, err := pgx.CollectRows(rows, scanSKUID)
	if err != nil {
		return nil, fmt.Errorf("list closed skus: %w", translate(err))
	}
	return ids, nil
}

// RecordRetired marks the SKU retired unless it is retired already, and
// returns the stored retirement. An undefined SKU is domain.ErrNotFound.
func (s *PostgresSKUStore) RecordRetired(ctx context.Context, sku domain.SKUID, r ledger.Retirement) (ledger.Retirement, error) {
	var stored ledger.Retirement
	err := s.pool.QueryRow(ctx, `
UPDATE skus SET retired_at = COALESCE(retired_at, $2), retired_seq = COALESCE(retired_seq, $3)
WHERE sku = $1 RETURNING retired_at, retired_seq`, sku.String(), r.At, r.Seq).Scan(&stored.At, &stored.Seq)
	if err != nil {
		return ledger.Retirement{}, fmt.Errorf("record retirement of %s: %w", sku, translate(err))
	}
	return stored, nil
}

// RecordReopened clears the SKU's retirement and notes when, if it was
// retired; otherwise it changes nothing.
func (s *PostgresSKUStore) RecordReopened(ctx context.Context, sku domain.SKUID) error {
	_, err := s.pool.Exec(ctx, `
UPDATE skus SET retired_at = NULL, retired_seq = NULL, reopened_at = now() WHERE sku = $1 AND retired_at IS NOT NULL`, sku.String())
	if err != nil {
		return fmt.Errorf("record reopening of %s: %w", sku, translate(err))
	}
	return nil
}

// ClosedUnretired lists the SKUs closed at least olderThan ago, and
// reopened at least as long ago if ever, by the database's clock, that are
// not retired.
func (s *PostgresSKUStore) ClosedUnretired(ctx context.Context, olderThan time.Duration) ([]domain.SKUID, error) {
	return s.listIDs(ctx, `
SELECT sku FROM skus
WHERE retired_at IS NULL
  AND GREATEST(closed_at, reopened_at) <= now() - $1::bigint * interval '1 microsecond'
ORDER BY sku`, olderThan.Microseconds())
}
