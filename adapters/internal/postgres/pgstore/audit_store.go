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
// the rows' seals, through the indexes of ledger_entries.
type PostgresAuditStore struct {
	pool *pgxpool.Pool
}

// NewPostgresAuditStore returns a store over pool.
func NewPostgresAuditStore(pool *pgxpool.Pool) *PostgresAuditStore {
	return &PostgresAuditStore{pool: pool}
}

// auditColumns are every column of ledger_entries, in auditEntries' scan
// order: the row's event through eventColumns, as the sealer read it, then
// when it was recorded and its link in its SKU's chain from its seal (empty
// until the sealer linked it). auditFrom joins them.
const (
	auditColumns = eventColumns + `, e.recorded_at, COALESCE(s.prev_hash, ''), COALESCE(s.hash, '')`
	auditFrom    = ` FROM ledger_entries e LEFT JOIN ledger_seals s ON s.sku = e.sku AND s.seq = e.seq`
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
			r                eventRow
			recorded         time.Time
			prevHash, hashed string
		)
		if err := row.Scan(append(r.dest(), &recorded, &prevHash, &hashed)...); err != nil {
			return ledger.AuditEntry{}, err
		}
		return auditEntry(r.event(), recorded, prevHash, hashed), nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", translate(err))
	}
	return entries, nil
}

// auditEntry is e as the audit lists it.
func auditEntry(e domain.Event, recorded time.Time, prevHash, hash string) ledger.AuditEntry {
	a := ledger.AuditEntry{EventID: e.ID, SKU: e.SKU, Seq: e.Seq, Type: e.Type, Delta: e.Delta, Qty: e.Qty,
		BalanceAfter: e.Balance, UserID: e.User, RequestID: e.RequestID, Actor: e.Actor, Reason: e.Reason,
		OccurredAt: e.OccurredAt, RecordedAt: recorded, StreamID: e.StreamID, PrevHash: prevHash, Hash: hash,
		HoldID: e.HoldID, OrderID: e.OrderID}
	if !e.ExpiresAt.IsZero() {
		a.ExpiresAt = &e.ExpiresAt
	}
	return a
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
// (sku, occurred_at) INCLUDE (delta) index of ledger_entries answers it
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
