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

// RecordArchive inserts the archive and its entries as the SKU's next
// version, calls drop, and commits only if drop succeeded. A SKU archived
// already at a.Seq returns that archive with recorded false; a concurrent
// archive of the same SKU and seq waits for the first one and then finds it.
func (s *PostgresBuyerArchiveStore) RecordArchive(ctx context.Context, a ledger.BuyerArchive, drop func(context.Context) error) (ledger.ArchiveSummary, bool, error) {
	sum := ledger.ArchiveSummary{Seq: a.Seq, Buyers: len(a.Buyers), Units: a.Units}
	recorded := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var version int
		err := tx.QueryRow(ctx, `
INSERT INTO buyer_archives (sku, version, seq, buyers_count, units)
SELECT $1, COALESCE(max(version), 0) + 1, $2, $3, $4 FROM buyer_archives WHERE sku = $1
ON CONFLICT (sku, seq) DO NOTHING RETURNING version, archived_at`, a.SKU, a.Seq, len(a.Buyers), a.Units).Scan(&version, &sum.ArchivedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return tx.QueryRow(ctx, `SELECT seq, buyers_count, units, archived_at FROM buyer_archives WHERE sku = $1 AND seq = $2`, a.SKU, a.Seq).
				Scan(&sum.Seq, &sum.Buyers, &sum.Units, &sum.ArchivedAt)
		}
		if err != nil {
			return err
		}
		entries := make([][]any, 0, len(a.Buyers))
		for user, qty := range a.Buyers {
			entries = append(entries, []any{a.SKU, version, user, qty})
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"buyer_archive_entries"}, []string{"sku", "version", "user_id", "qty"}, pgx.CopyFromRows(entries)); err != nil {
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
