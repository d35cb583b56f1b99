package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/ledger"
)

var _ ledger.BuyerArchiveStore = (*PostgresBuyerArchiveStore)(nil)

// PostgresBuyerArchiveStore keeps the buyers of closed sales in buyer_archives
// and buyer_archive_entries once Redis no longer holds them.
type PostgresBuyerArchiveStore struct {
	pool *pgxpool.Pool
}

// NewPostgresBuyerArchiveStore returns a store over pool.
func NewPostgresBuyerArchiveStore(pool *pgxpool.Pool) *PostgresBuyerArchiveStore {
	return &PostgresBuyerArchiveStore{pool: pool}
}

// RecordArchive inserts the archive and its entries, calls drop, and
// commits only if drop succeeded. A SKU archived already returns its stored
// archive with recorded false; a concurrent archive of the same SKU waits
// for the first one and then finds it.
func (s *PostgresBuyerArchiveStore) RecordArchive(ctx context.Context, a ledger.BuyerArchive, drop func(context.Context) error) (ledger.ArchiveSummary, bool, error) {
	sum := ledger.ArchiveSummary{Seq: a.Seq, Buyers: len(a.Buyers), Units: a.Units}
	recorded := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
INSERT INTO buyer_archives (sku, seq, buyers_count, units) VALUES ($1, $2, $3, $4)
ON CONFLICT (sku) DO NOTHING RETURNING archived_at`, a.SKU, a.Seq, len(a.Buyers), a.Units).Scan(&sum.ArchivedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `SELECT seq, buyers_count, units, archived_at FROM buyer_archives WHERE sku = $1`, a.SKU).
				Scan(&sum.Seq, &sum.Buyers, &sum.Units, &sum.ArchivedAt)
		}
		if err != nil {
			return err
		}
		entries := make([][]any, 0, len(a.Buyers))
		for user, qty := range a.Buyers {
			entries = append(entries, []any{a.SKU, user, qty})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"buyer_archive_entries"}, []string{"sku", "user_id", "qty"}, pgx.CopyFromRows(entries)); err != nil {
			return err
		}
		if err := drop(ctx); err != nil {
			return err
		}
		recorded = true
		return nil
	})
	if err != nil {
		return ledger.ArchiveSummary{}, false, fmt.Errorf("archive buyers of %s: %w", a.SKU, translate(err))
	}
	return sum, recorded, nil
}
