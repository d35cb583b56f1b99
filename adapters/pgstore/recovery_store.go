package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var (
	_ ledger.LedgerScanner     = (*PostgresLedgerStore)(nil)
	_ ledger.BalanceRebuilder  = (*PostgresLedgerStore)(nil)
	_ ledger.SKUCatalog        = (*PostgresSKUStore)(nil)
	_ ledger.BuyerArchiveStore = (*PostgresArchiveStore)(nil)
)

// eventColumns are a ledger row's event, in scanEvents' order.
const eventColumns = `event_id::text, sku, seq, type, delta, qty, balance_after, COALESCE(user_id, ''), COALESCE(request_id, ''),
	COALESCE(actor, ''), COALESCE(reason, ''), occurred_at, stream_id, prev_hash, hash`

// ScanSKU calls fn with every ledger event of sku, in seq order.
func (s *PostgresLedgerStore) ScanSKU(ctx context.Context, sku domain.SKUID, fn func(domain.Event) error) error {
	return s.scanEvents(ctx, fn, `SELECT `+eventColumns+` FROM ledger_entries WHERE sku = $1 ORDER BY seq`, sku.String())
}

// ScanAll calls fn with every ledger event ordered by (sku, seq), streaming
// the rows as PostgreSQL sends them: the ledger is never held in memory.
func (s *PostgresLedgerStore) ScanAll(ctx context.Context, fn func(domain.Event) error) error {
	return s.scanEvents(ctx, fn, `SELECT `+eventColumns+` FROM ledger_entries ORDER BY sku, seq`)
}

func (s *PostgresLedgerStore) scanEvents(ctx context.Context, fn func(domain.Event) error, query string, args ...any) error {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read the ledger: %w", translate(err))
	}
	defer rows.Close()
	var (
		e   domain.Event
		typ string
	)
	for rows.Next() {
		if err := rows.Scan(&e.ID, &e.SKU, &e.Seq, &typ, &e.Delta, &e.Qty, &e.Balance, &e.User, &e.RequestID,
			&e.Actor, &e.Reason, &e.OccurredAt, &e.StreamID, &e.PrevHash, &e.Hash); err != nil {
			return fmt.Errorf("read the ledger: %w", translate(err))
		}
		e.Type = domain.EventType(typ)
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the ledger: %w", translate(err))
	}
	return nil
}

// RebuildBalance sets sku's balances row to the sum of its ledger deltas and
// its highest seq, or deletes the row when the ledger has no rows of sku.
// corrected reports whether the row changed. It is safe while the projector
// runs, in one READ COMMITTED transaction:
//
//  1. Lock the balances row (creating it first if it is missing). The
//     projector moves the row in the same transaction that inserts the
//     ledger rows, under the same row lock, and commits right after.
//  2. In a new statement, sum the ledger and write the row. Under READ
//     COMMITTED each statement takes a fresh snapshot, and this one starts
//     after the lock was granted. So every projector transaction that moved
//     the row before us has committed, and its rows are in the sum. Every
//     one that has not moved it yet is not committed, so its rows are not
//     in the sum, and it adds its delta on top of ours once we commit
//     (ON CONFLICT DO UPDATE reads the newest row version). Nothing is
//     counted twice or lost. In one statement (or under REPEATABLE READ)
//     the snapshot would predate the lock wait and miss the rows committed
//     by the transaction we waited for.
func (s *PostgresLedgerStore) RebuildBalance(ctx context.Context, sku string) (corrected bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var existed bool
		err := tx.QueryRow(ctx, `
WITH ins AS (
    INSERT INTO balances (sku, balance, last_seq) VALUES ($1, 0, 0) ON CONFLICT (sku) DO NOTHING RETURNING 1
)
SELECT NOT EXISTS (SELECT 1 FROM ins)`, sku).Scan(&existed)
		if err != nil {
			return err
		}
		var oldBalance, oldSeq int64
		if err := tx.QueryRow(ctx, `SELECT balance, last_seq FROM balances WHERE sku = $1 FOR UPDATE`, sku).Scan(&oldBalance, &oldSeq); err != nil {
			return err
		}
		var balance, seq, rows int64
		err = tx.QueryRow(ctx, `SELECT COALESCE(sum(delta), 0), COALESCE(max(seq), 0), count(*) FROM ledger_entries WHERE sku = $1`, sku).
			Scan(&balance, &seq, &rows)
		if err != nil {
			return err
		}
		switch {
		case rows == 0:
			// An empty ledger has no balance: a row here was made up.
			_, err = tx.Exec(ctx, `DELETE FROM balances WHERE sku = $1`, sku)
			corrected = existed
		case !existed || balance != oldBalance || seq != oldSeq:
			_, err = tx.Exec(ctx, `UPDATE balances SET balance = $2, last_seq = $3, updated_at = now() WHERE sku = $1`, sku, balance, seq)
			corrected = true
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("rebuild balance of %s: %w", sku, translate(err))
	}
	return corrected, nil
}

// BalanceSKUs lists every SKU with ledger rows or a balances row.
func (s *PostgresLedgerStore) BalanceSKUs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku FROM balances UNION SELECT DISTINCT sku FROM ledger_entries ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list balances: %w", translate(err))
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list balances: %w", translate(err))
	}
	return skus, nil
}

const skuRecordQuery = `
SELECT s.sku, s.initial_stock, s.per_user_limit, s.closed_at, a.seq, a.buyers_count, a.units, a.archived_at
FROM skus s LEFT JOIN buyer_archives a ON a.sku = s.sku`

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
		seq, buyers  *int64
		units        *int64
		archivedAt   *time.Time
	)
	if err := row.Scan(&sku, &stock, &limit, &closedAt, &seq, &buyers, &units, &archivedAt); err != nil {
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
	rows, err := s.pool.Query(ctx, `
SELECT s.sku FROM skus s
WHERE s.closed_at <= now() - $1::bigint * interval '1 microsecond'
  AND NOT EXISTS (SELECT 1 FROM buyer_archives a WHERE a.sku = s.sku)
ORDER BY s.sku`, olderThan.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("list closed skus: %w", translate(err))
	}
	ids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.SKUID, error) {
		var sku string
		if err := row.Scan(&sku); err != nil {
			return domain.SKUID{}, err
		}
		return domain.NewSKUID(sku)
	})
	if err != nil {
		return nil, fmt.Errorf("list closed skus: %w", translate(err))
	}
	return ids, nil
}

// PostgresArchiveStore keeps the buyers of closed sales in buyer_archives
// and buyer_archive_entries once Redis no longer holds them.
type PostgresArchiveStore struct {
	pool *pgxpool.Pool
}

// NewPostgresArchiveStore returns a store over pool.
func NewPostgresArchiveStore(pool *pgxpool.Pool) *PostgresArchiveStore {
	return &PostgresArchiveStore{pool: pool}
}

// RecordArchive inserts the archive and its entries, calls drop, and
// commits only if drop succeeded. A SKU archived already returns its stored
// archive with recorded false; a concurrent archive of the same SKU waits
// for the first one and then finds it.
func (s *PostgresArchiveStore) RecordArchive(ctx context.Context, a ledger.BuyerArchive, drop func(context.Context) error) (ledger.ArchiveSummary, bool, error) {
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
