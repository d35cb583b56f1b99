package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

var _ reconcile.LedgerView = (*PostgresLedgerSnapshotStore)(nil)

// PostgresLedgerSnapshotStore is the ledger as the reconciler reads it:
// folds of ledger_entries and balances taken in one snapshot, the seqs and
// event ids it holds. It also appends the in-flight events the reconciler
// recovers from a stream, exactly as the projector would.
type PostgresLedgerSnapshotStore struct {
	pool *pgxpool.Pool
}

// NewPostgresLedgerSnapshotStore returns a store over pool.
func NewPostgresLedgerSnapshotStore(pool *pgxpool.Pool) *PostgresLedgerSnapshotStore {
	return &PostgresLedgerSnapshotStore{pool: pool}
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LedgerSnapshot folds the ledger of skus (nil: every SKU) into stock, seq,
// row count, holders and distinct deduction request ids, joined with the
// balances rows, and tells which of the inFlight events the ledger holds
// and which of their reserves' holds it has ended, all in one REPEATABLE
// READ snapshot: an event committed meanwhile is either in every answer or
// in none, so the reconciler never counts it twice or not at all.
func (s *PostgresLedgerSnapshotStore) LedgerSnapshot(ctx context.Context, skus []string, inFlight []domain.Event) (reconcile.LedgerFold, error) {
	var eventIDs, holdIDs []string
	for _, e := range inFlight {
		eventIDs = append(eventIDs, e.ID)
		if e.Type == domain.EventReserved {
			holdIDs = append(holdIDs, e.HoldID)
		}
	}
	var fold reconcile.LedgerFold
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if fold.SKUs, err = summaries(ctx, tx, skus); err != nil {
			return err
		}
		if err = openHoldIDs(ctx, tx, skus, fold.SKUs); err != nil {
			return err
		}
		if fold.Known, err = knownEventIDs(ctx, tx, eventIDs); err != nil {
			return err
		}
		fold.EndedHolds, err = endedHolds(ctx, tx, holdIDs)
		return err
	})
	if err != nil {
		return reconcile.LedgerFold{}, fmt.Errorf("snapshot the ledger: %w", translate(err))
	}
	return fold, nil
}

func summaries(ctx context.Context, q querier, skus []string) (map[string]domain.LedgerSummary, error) {
	rows, err := q.Query(ctx, `
WITH l AS (
    SELECT sku, sum(delta) AS stock, max(seq) AS seq, count(*) AS n,
           count(DISTINCT request_id) FILTER (WHERE type = 'deducted') AS deductions,
           sum(`+heldDelta+`) AS held,
           count(*) FILTER (WHERE type = 'reserved') - count(*) FILTER (WHERE type IN ('confirmed', 'cancelled', 'expired')) AS open_holds
    FROM ledger_entries WHERE $1::text[] IS NULL OR sku = ANY($1) GROUP BY sku
), h AS (
    -- Sold and held units both count against the limit, so a user's
    -- counted units are minus the deltas of that user's purchase and hold
    -- events (confirmed moves none).
    SELECT sku, count(*) AS holders FROM (
        SELECT sku, user_id, sum(-delta) AS held
        FROM ledger_entries
        WHERE type IN ('deducted', 'released', 'reserved', 'cancelled', 'expired') AND ($1::text[] IS NULL OR sku = ANY($1))
        GROUP BY sku, user_id
    ) per_user WHERE held > 0 GROUP BY sku
), b AS (
    SELECT sku, balance, held, last_seq, updated_at FROM balances WHERE $1::text[] IS NULL OR sku = ANY($1)
)
SELECT COALESCE(l.sku, b.sku), COALESCE(l.stock, 0), COALESCE(l.seq, 0), COALESCE(l.n, 0), COALESCE(h.holders, 0),
       COALESCE(l.deductions, 0), COALESCE(l.held, 0), COALESCE(l.open_holds, 0), b.balance, b.held, b.last_seq, b.updated_at
FROM l FULL JOIN b ON b.sku = l.sku LEFT JOIN h ON h.sku = COALESCE(l.sku, b.sku)`, skus)
	if err != nil {
		return nil, fmt.Errorf("fold the ledger: %w", translate(err))
	}
	out := map[string]domain.LedgerSummary{}
	var (
		sku       string
		sum       domain.LedgerSummary
		bal       *int64
		held      *int64
		lastSeq   *int64
		updatedAt *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&sku, &sum.Stock, &sum.Seq, &sum.Count, &sum.Holders, &sum.Deductions, &sum.Held, &sum.OpenHolds,
		&bal, &held, &lastSeq, &updatedAt}, func() error {
		v := sum
		if bal != nil && held != nil && lastSeq != nil && updatedAt != nil {
			v.Balance = &domain.LedgerBalance{Stock: *bal, Held: *held, LastSeq: *lastSeq, UpdatedAt: *updatedAt}
		}
		out[sku] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fold the ledger: %w", translate(err))
	}
	return out, nil
}

// openHoldIDs adds to sums the ids of each SKU's open holds: reserved, and
// no event of the hold since. The hold_id index finds a hold's end.
func openHoldIDs(ctx context.Context, q querier, skus []string, sums map[string]domain.LedgerSummary) error {
	rows, err := q.Query(ctx, `
SELECT r.sku, r.hold_id::text FROM ledger_entries r
WHERE r.type = 'reserved' AND ($1::text[] IS NULL OR r.sku = ANY($1))
  AND NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.hold_id = r.hold_id AND e.type <> 'reserved')
ORDER BY r.sku, r.hold_id`, skus)
	if err != nil {
		return fmt.Errorf("open holds of the ledger: %w", translate(err))
	}
	var sku, id string
	_, err = pgx.ForEachRow(rows, []any{&sku, &id}, func() error {
		sum := sums[sku]
		sum.OpenHoldIDs = append(sum.OpenHoldIDs, id)
		sums[sku] = sum
		return nil
	})
	if err != nil {
		return fmt.Errorf("open holds of the ledger: %w", translate(err))
	}
	return nil
}

// pingTimeout bounds Ping: the reconciler asks before reading Redis, and a
// PostgreSQL that does not answer in this long is as good as down.
const pingTimeout = 2 * time.Second

// Ping checks that PostgreSQL answers; a failure is domain.ErrUnavailable.
func (s *PostgresLedgerSnapshotStore) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: postgres: %w", domain.ErrUnavailable, err)
	}
	return nil
}

// KnownEventIDs returns which of ids the ledger holds.
func (s *PostgresLedgerSnapshotStore) KnownEventIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	return knownEventIDs(ctx, s.pool, ids)
}

func knownEventIDs(ctx context.Context, q querier, ids []string) (map[string]bool, error) {
	return foundIDs(ctx, q, `SELECT event_id::text FROM ledger_entries WHERE event_id = ANY($1::uuid[])`, ids, "event ids")
}

// endedHolds returns which of holds have an end (confirmed, cancelled or
// expired) in the ledger. The hold_id index finds each.
func endedHolds(ctx context.Context, q querier, holds []string) (map[string]bool, error) {
	return foundIDs(ctx, q, `SELECT hold_id::text FROM ledger_entries WHERE hold_id = ANY($1::uuid[]) AND type <> 'reserved'`,
		holds, "ends of holds")
}

// foundIDs returns which of ids query, which takes them as $1 and selects
// one text column, finds; what names them in an error.
func foundIDs(ctx context.Context, q querier, query string, ids []string, what string) (map[string]bool, error) {
	found := map[string]bool{}
	if len(ids) == 0 {
		return found, nil
	}
	rows, err := q.Query(ctx, query, ids)
	if err != nil {
		return nil, fmt.Errorf("look up %d %s: %w", len(ids), what, translate(err))
	}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { found[id] = true; return nil })
	if err != nil {
		return nil, fmt.Errorf("look up %d %s: %w", len(ids), what, translate(err))
	}
	return found, nil
}

// Seqs returns every seq the ledger holds for sku, to name gaps.
func (s *PostgresLedgerSnapshotStore) Seqs(ctx context.Context, id domain.SKUID) ([]int64, error) {
	sku := id.String()
	rows, err := s.pool.Query(ctx, `SELECT seq FROM ledger_entries WHERE sku = $1 ORDER BY seq`, sku)
	if err != nil {
		return nil, fmt.Errorf("seqs of %s: %w", sku, translate(err))
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("seqs of %s: %w", sku, translate(err))
	}
	return seqs, nil
}

// AppendBatch appends events the reconciler recovered, as
// PostgresProjectionStore.AppendBatch does: idempotent and order-free.
func (s *PostgresLedgerSnapshotStore) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	return appendEvents(ctx, s.pool, events)
}
