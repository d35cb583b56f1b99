package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	// watermarks remembers each SKU's last watermark (string → int64). The
	// ledger is append-only and a seq is unique per SKU, so a seq once
	// gap-free below stays so, and the next Balance scans only the rows
	// above it.
	watermarks sync.Map
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

// Balance returns the SKU's projected balance and its ledger watermark,
// both read in one snapshot, or domain.ErrNotFound when no event of the SKU
// has been projected yet. bal.LastSeq is the highest seq the ledger has
// seen; watermark is the highest seq with no gap below it (every seq from 1
// to it is in the ledger), so watermark <= bal.LastSeq, and they differ
// while a batch with lower seqs is still being committed.
//
// The watermark costs an index-only scan of the SKU's rows above the last
// watermark this store computed: a count and max first, and only when they
// show a gap, a row_number() window that stops at the first one. The first
// call for a SKU scans all of its rows (about 0.1-0.5 s for a million, on a
// small machine); later calls scan only what was projected since.
func (s *PostgresLedgerStore) Balance(ctx context.Context, sku domain.SKUID) (bal domain.LedgerBalance, watermark int64, err error) {
	var known int64
	if v, ok := s.watermarks.Load(sku.String()); ok {
		known = v.(int64)
	}
	err = s.pool.QueryRow(ctx, `
SELECT b.balance, b.held, b.last_seq, b.updated_at, (
    SELECT CASE
        WHEN above.n = 0 THEN $2
        WHEN above.m - $2 = above.n THEN above.m
        ELSE (SELECT $2 + t.rn - 1 FROM (
                  SELECT seq, row_number() OVER (ORDER BY seq) AS rn
                  FROM ledger_entries WHERE sku = $1 AND seq > $2) t
              WHERE t.seq <> $2 + t.rn LIMIT 1)
    END
    FROM (SELECT count(*) AS n, max(seq) AS m FROM ledger_entries WHERE sku = $1 AND seq > $2) above)
FROM balances b WHERE b.sku = $1`, sku.String(), known).
		Scan(&bal.Stock, &bal.Held, &bal.LastSeq, &bal.UpdatedAt, &watermark)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return domain.LedgerBalance{}, 0, fmt.Errorf("balance of %s: %w", sku, domain.ErrNotFound)
		}
		return domain.LedgerBalance{}, 0, fmt.Errorf("balance of %s: %w", sku, translate(err))
	}
	s.watermarks.Store(sku.String(), watermark)
	return bal, watermark, nil
}

// eventColumns are a ledger row's event as the row aliased e holds it, in
// eventRow's order. Every reader of events selects them: the sealer, the
// chain verifier (ScanChain), the audit export and the services, so a seal
// is checked over exactly the fields it was computed from (domain.SealHash
// covers every one but stream_id). Each is COALESCEd so that a row missing
// from ScanChain's full join reads as the zero event.
const eventColumns = `COALESCE(e.event_id::text, ''), COALESCE(e.sku, ''), COALESCE(e.seq, 0), COALESCE(e.type, ''),
	COALESCE(e.delta, 0), COALESCE(e.qty, 0), COALESCE(e.balance_after, 0), COALESCE(e.user_id, ''),
	COALESCE(e.request_id, ''), COALESCE(e.actor, ''), COALESCE(e.reason, ''), COALESCE(e.occurred_at, 'epoch'),
	COALESCE(e.stream_id, ''), COALESCE(e.hold_id::text, ''), COALESCE(e.order_id, ''), e.expires_at`

// eventRow receives one row's eventColumns.
type eventRow struct {
	e       domain.Event
	typ     string
	expires *time.Time
}

// dest are the scan destinations of eventColumns, in order.
func (r *eventRow) dest() []any {
	return []any{&r.e.ID, &r.e.SKU, &r.e.Seq, &r.typ, &r.e.Delta, &r.e.Qty, &r.e.Balance, &r.e.User, &r.e.RequestID,
		&r.e.Actor, &r.e.Reason, &r.e.OccurredAt, &r.e.StreamID, &r.e.HoldID, &r.e.OrderID, &r.expires}
}

// event is the event scanned into r.
func (r *eventRow) event() domain.Event {
	e := r.e
	e.Type = domain.EventType(r.typ)
	if r.expires != nil {
		e.ExpiresAt = r.expires.UTC()
	}
	return e
}

// ScanSKU calls fn with every ledger event of sku, in seq order.
func (s *PostgresLedgerStore) ScanSKU(ctx context.Context, sku domain.SKUID, fn func(domain.Event) error) error {
	return scanEvents(ctx, s.pool, fn, `SELECT `+eventColumns+` FROM ledger_entries e WHERE sku = $1 ORDER BY seq`, sku.String())
}

// Purchase finds the deduction user made of sku with request id req, and
// its release, from the ledger alone: the answer to a retry once Redis
// forgot the SKU. It reads through the user index, so it costs the user's
// own rows, not the SKU's.
func (s *PostgresLedgerStore) Purchase(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID) (domain.Purchase, bool, error) {
	var (
		p     domain.Purchase
		found bool
	)
	err := scanEvents(ctx, s.pool, func(e domain.Event) error {
		switch e.Type {
		case domain.EventDeducted:
			p.User, p.Qty, p.EventID, p.Seq, p.Remaining, found = e.User, e.Qty, e.ID, e.Seq, e.Balance, true
		case domain.EventReleased:
			p.Released, p.ReleaseEventID, p.ReleaseSeq = true, e.ID, e.Seq
		}
		return nil
	}, `SELECT `+eventColumns+` FROM ledger_entries e
WHERE user_id = $1 AND sku = $2 AND request_id = $3 AND type IN ('deducted', 'released') ORDER BY seq`,
		user.String(), sku.String(), req.String())
	if err != nil {
		return domain.Purchase{}, false, fmt.Errorf("purchase %q of %s: %w", req.String(), sku, err)
	}
	return p, found, nil
}

// OrderReserves returns the reserved events of order's lines in the order
// they were reserved: where an order's lines are found once Redis lost the
// order's record. Event ids are UUIDv7, strictly increasing within the
// process that places an order line by line, so they order the lines where
// the Redis clock's milliseconds, shared by lines reserved within one, would not.
func (s *PostgresLedgerStore) OrderReserves(ctx context.Context, order domain.OrderID) ([]domain.Event, error) {
	var reserves []domain.Event
	err := scanEvents(ctx, s.pool, func(e domain.Event) error {
		reserves = append(reserves, e)
		return nil
	}, `SELECT `+eventColumns+` FROM ledger_entries e WHERE order_id = $1 AND type = 'reserved' ORDER BY event_id`, order.String())
	if err != nil {
		return nil, fmt.Errorf("reserves of order %q: %w", order, err)
	}
	return reserves, nil
}

// HoldEvents returns the events that carry hold's id in sku, in seq order:
// the hold's reserve, its end and the release of its sale, which is how
// the holds of a SKU retired from Redis are answered. The hold_id index
// finds them.
func (s *PostgresLedgerStore) HoldEvents(ctx context.Context, sku domain.SKUID, hold domain.HoldID) ([]domain.Event, error) {
	var events []domain.Event
	err := scanEvents(ctx, s.pool, func(e domain.Event) error {
		events = append(events, e)
		return nil
	}, `SELECT `+eventColumns+` FROM ledger_entries e WHERE hold_id = $1 AND sku = $2 ORDER BY seq`, hold.String(), sku.String())
	if err != nil {
		return nil, fmt.Errorf("events of hold %s of %s: %w", hold, sku, err)
	}
	return events, nil
}

// ScanAll calls fn with every ledger event ordered by (sku, seq), streaming
// the rows as PostgreSQL sends them: the ledger is never held in memory.
func (s *PostgresLedgerStore) ScanAll(ctx context.Context, fn func(domain.Event) error) error {
	return scanEvents(ctx, s.pool, fn, `SELECT `+eventColumns+` FROM ledger_entries e ORDER BY sku, seq`)
}

func scanEvents(ctx context.Context, q querier, fn func(domain.Event) error, query string, args ...any) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read the ledger: %w", translate(err))
	}
	defer rows.Close()
	var r eventRow
	dest := r.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read the ledger: %w", translate(err))
		}
		if err := fn(r.event()); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the ledger: %w", translate(err))
	}
	return nil
}
