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

var (
	_ ledger.LedgerReader  = (*PostgresLedgerStore)(nil)
	_ ledger.LedgerScanner = (*PostgresLedgerStore)(nil)
)

// PostgresLedgerStore reads the ledger_entries table and its balances
// projection for the service, recovery, archiving and the chain verifier.
// It never writes: the projector writes through PostgresProjectionStore.
type PostgresLedgerStore struct {
	pool *pgxpool.Pool
}

// NewPostgresLedgerStore returns a store over pool.
func NewPostgresLedgerStore(pool *pgxpool.Pool) *PostgresLedgerStore {
	return &PostgresLedgerStore{pool: pool}
}

// HasEvents reports whether the ledger holds any event for sku.
func (s *PostgresLedgerStore) HasEvents(ctx context.Context, sku domain.SKUID) (bool, error) {
	var exists bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_entries WHERE sku = $1)`, sku.String()).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("ledger events of %s: %w", sku, translate(err))
	}
	return exists, nil
}

// Balance returns the SKU's projected balance, or domain.ErrNotFound when no
// event of the SKU has been projected yet.
func (s *PostgresLedgerStore) Balance(ctx context.Context, sku domain.SKUID) (domain.LedgerBalance, error) {
	var b domain.LedgerBalance
	err := s.pool.QueryRow(ctx, `SELECT balance, last_seq, updated_at FROM balances WHERE sku = $1`, sku.String()).
		Scan(&b.Stock, &b.LastSeq, &b.UpdatedAt)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return domain.LedgerBalance{}, fmt.Errorf("balance of %s: %w", sku, domain.ErrNotFound)
		}
		return domain.LedgerBalance{}, fmt.Errorf("balance of %s: %w", sku, translate(err))
	}
	return b, nil
}

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
