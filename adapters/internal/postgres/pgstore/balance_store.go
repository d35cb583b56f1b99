package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var _ ledger.BalanceRecomputer = (*PostgresBalanceStore)(nil)

// PostgresBalanceStore recomputes the balances projection from
// ledger_entries, beside the projector that moves it.
type PostgresBalanceStore struct {
	pool *pgxpool.Pool
}

// NewPostgresBalanceStore returns a store over pool.
func NewPostgresBalanceStore(pool *pgxpool.Pool) *PostgresBalanceStore {
	return &PostgresBalanceStore{pool: pool}
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
func (s *PostgresBalanceStore) RebuildBalance(ctx context.Context, id domain.SKUID) (corrected bool, err error) {
	sku := id.String()
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
		var oldBalance, oldHeld, oldSeq int64
		if err := tx.QueryRow(ctx, `SELECT balance, held, last_seq FROM balances WHERE sku = $1 FOR UPDATE`, sku).Scan(&oldBalance, &oldHeld, &oldSeq); err != nil {
			return err
		}
		var balance, held, seq, rows int64
		err = tx.QueryRow(ctx, `SELECT COALESCE(sum(delta), 0), COALESCE(sum(`+heldDelta+`), 0), COALESCE(max(seq), 0), count(*)
FROM ledger_entries WHERE sku = $1`, sku).
			Scan(&balance, &held, &seq, &rows)
		if err != nil {
			return err
		}
		switch {
		case rows == 0:
			// An empty ledger has no balance: a row here was made up.
			_, err = tx.Exec(ctx, `DELETE FROM balances WHERE sku = $1`, sku)
			corrected = existed
		case !existed || balance != oldBalance || held != oldHeld || seq != oldSeq:
			_, err = tx.Exec(ctx, `UPDATE balances SET balance = $2, held = $3, last_seq = $4, updated_at = now() WHERE sku = $1`, sku, balance, held, seq)
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
func (s *PostgresBalanceStore) BalanceSKUs(ctx context.Context) ([]string, error) {
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
