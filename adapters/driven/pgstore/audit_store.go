package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var _ ledger.AuditStore = (*PostgresAuditStore)(nil)

// PostgresAuditStore answers the audit queries from ledger_entries and
// the rows' seals, through the indexes of migration 00007.
type PostgresAuditStore struct {
	pool *pgxpool.Pool
}

// NewPostgresAuditStore returns a store over pool.
func NewPostgresAuditStore(pool *pgxpool.Pool) *PostgresAuditStore {
	return &PostgresAuditStore{pool: pool}
}

// auditColumns are every column of ledger_entries, in scanAuditEntry's
// order, with the row's link in its SKU's chain: its seal's once the
// sealer linked it, else the SHA-1 link Redis computed for rows written
// before the chain moved to the ledger, else empty. auditFrom joins them.
const (
	auditColumns = `e.event_id::text, e.sku, e.seq, e.type, e.delta, e.qty, e.balance_after, COALESCE(e.user_id, ''),
       COALESCE(e.request_id, ''), COALESCE(e.actor, ''), COALESCE(e.reason, ''), e.occurred_at, e.recorded_at, e.stream_id,
       COALESCE(s.prev_hash, e.prev_hash), COALESCE(s.hash, e.hash), COALESCE(e.hold_id::text, ''), COALESCE(e.order_id, ''), e.expires_at`
	auditFrom = ` FROM ledger_entries e LEFT JOIN ledger_seals s ON s.sku = e.sku AND s.seq = e.seq`
)

// SKUEntries returns up to limit rows of sku with seq above after, in seq
// order, through the (sku, seq) unique index.
func (s *PostgresAuditStore) SKUEntries(ctx context.Context, sku domain.SKUID, after int64, limit int) ([]ledger.AuditEntry, error) {
	return s.auditEntries(ctx, `SELECT `+auditColumns+auditFrom+`
WHERE e.sku = $1 AND e.seq > $2 ORDER BY e.seq LIMIT $3`, sku.String(), after, limit)
}

// UserEntries returns up to limit rows of user after the cursor, ordered
// by (occurred_at, event_id), through ledger_entries_user_idx.
func (s *PostgresAuditStore) UserEntries(ctx context.Context, user domain.UserID, after ledger.UserCursor, limit int) ([]ledger.AuditEntry, error) {
	if after.IsZero() {
		return s.auditEntries(ctx, `SELECT `+auditColumns+auditFrom+`
WHERE e.user_id = $1 ORDER BY e.occurred_at, e.event_id LIMIT $2`, user.String(), limit)
	}
	return s.auditEntries(ctx, `SELECT `+auditColumns+auditFrom+`
WHERE e.user_id = $1 AND (e.occurred_at, e.event_id) > ($2, $3::uuid) ORDER BY e.occurred_at, e.event_id LIMIT $4`,
		user.String(), after.OccurredAt, after.EventID, limit)
}

func (s *PostgresAuditStore) auditEntries(ctx context.Context, query string, args ...any) ([]ledger.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", translate(err))
	}
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.AuditEntry, error) {
		var (
			e   ledger.AuditEntry
			typ string
		)
		err := row.Scan(&e.EventID, &e.SKU, &e.Seq, &typ, &e.Delta, &e.Qty, &e.BalanceAfter, &e.UserID,
			&e.RequestID, &e.Actor, &e.Reason, &e.OccurredAt, &e.RecordedAt, &e.StreamID, &e.PrevHash, &e.Hash,
			&e.HoldID, &e.OrderID, &e.ExpiresAt)
		e.Type = domain.EventType(typ)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", translate(err))
	}
	return entries, nil
}

// Holders folds per user the units of sku that count against the per-user
// limit: sold (deducted or confirmed, less released) and held in open
// holds, as Redis's buyers hash, restore and reconcile count them; the
// sum of minus the deltas of a user's purchase and hold events (confirmed
// moves none, since the reserve took the units). It returns up to limit users after the user id after who
// still hold units, in byte order of their ids whatever the database's
// collation, so every deployment lists and pages them alike. Each page
// folds the SKU's rows of users above after.
func (s *PostgresAuditStore) Holders(ctx context.Context, sku domain.SKUID, after string, limit int) ([]ledger.Holding, error) {
	rows, err := s.pool.Query(ctx, `
SELECT user_id, held FROM (
    SELECT user_id, sum(-delta) AS held
    FROM ledger_entries
    WHERE sku = $1 AND type IN ('deducted', 'released', 'reserved', 'cancelled', 'expired') AND user_id COLLATE "C" > $2
    GROUP BY user_id
) per_user
WHERE held > 0 ORDER BY user_id COLLATE "C" LIMIT $3`, sku.String(), after, limit)
	if err != nil {
		return nil, fmt.Errorf("fold buyers: %w", translate(err))
	}
	holders, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ledger.Holding])
	if err != nil {
		return nil, fmt.Errorf("fold buyers: %w", translate(err))
	}
	return holders, nil
}

// StockAt sums the deltas of sku's rows that occurred at or before at. The
// (sku, occurred_at) INCLUDE (delta) index of migration 00007 answers it
// with an index-only scan, never touching the table's rows.
func (s *PostgresAuditStore) StockAt(ctx context.Context, sku domain.SKUID, at time.Time) (int64, error) {
	var stock int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(sum(delta), 0) FROM ledger_entries WHERE sku = $1 AND occurred_at <= $2`,
		sku.String(), at).Scan(&stock)
	if err != nil {
		return 0, fmt.Errorf("fold stock: %w", translate(err))
	}
	return stock, nil
}
