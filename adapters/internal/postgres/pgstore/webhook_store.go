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

// PostgresWebhookStore keeps business-event webhook subscriptions and, per
// subscription and SKU, the seq up to which the ledger was delivered.
type PostgresWebhookStore struct {
	pool *pgxpool.Pool
}

var _ ledger.WebhookStore = (*PostgresWebhookStore)(nil)

// NewPostgresWebhookStore returns a store over pool.
func NewPostgresWebhookStore(pool *pgxpool.Pool) *PostgresWebhookStore {
	return &PostgresWebhookStore{pool: pool}
}

const webhookColumns = `id, url, event_types, secret, COALESCE(previous_secret, ''),
	COALESCE(previous_expires_at, 'epoch'::timestamptz), created_by, created_at`

func scanWebhook(row pgx.Row) (domain.WebhookSubscription, error) {
	var w domain.WebhookSubscription
	err := row.Scan(&w.ID, &w.URL, &w.EventTypes, &w.Secret, &w.PreviousSecret, &w.PreviousExpiresAt, &w.CreatedBy, &w.CreatedAt)
	if w.PreviousSecret == "" {
		w.PreviousExpiresAt = time.Time{}
	}
	return w, err
}

// CreateWebhook stores w and starts its cursors at every SKU's last
// projected seq, in one transaction.
func (s *PostgresWebhookStore) CreateWebhook(ctx context.Context, w domain.WebhookSubscription) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_subscriptions (id, url, event_types, secret, created_by, created_at)
VALUES ($1, $2, $3, $4, $5, $6)`, w.ID, w.URL, w.EventTypes, w.Secret, w.CreatedBy, w.CreatedAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhook_cursors (subscription_id, sku, seq) SELECT $1, sku, last_seq FROM balances`, w.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("store webhook: %w", translate(err))
	}
	return nil
}

// Webhooks lists every subscription, oldest first.
func (s *PostgresWebhookStore) Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhook_subscriptions ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", translate(err))
	}
	defer rows.Close()
	var out []domain.WebhookSubscription
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", translate(err))
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", translate(err))
	}
	return out, nil
}

// DeleteWebhook removes subscription id and, by cascade, its cursors.
func (s *PostgresWebhookStore) DeleteWebhook(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_subscriptions WHERE id = $1`, id)
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		return domain.ErrNotFound
	}
	return nil
}

// RotateWebhookSecret moves the current secret to previous_secret, valid
// until previousExpiresAt, and stores secret.
func (s *PostgresWebhookStore) RotateWebhookSecret(ctx context.Context, id, secret string, previousExpiresAt time.Time) (domain.WebhookSubscription, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `UPDATE webhook_subscriptions
SET previous_secret = secret, previous_expires_at = $3, secret = $2
WHERE id = $1 RETURNING `+webhookColumns, id, secret, previousExpiresAt))
	if err != nil {
		return domain.WebhookSubscription{}, translate(err)
	}
	return w, nil
}

// PendingSKUs lists the SKUs whose ledger goes past subscription id's
// cursor (a SKU without a cursor starts at 0), with the cursor.
func (s *PostgresWebhookStore) PendingSKUs(ctx context.Context, id string) ([]ledger.WebhookCursor, error) {
	rows, err := s.pool.Query(ctx, `SELECT b.sku, COALESCE(c.seq, 0) FROM balances b
LEFT JOIN webhook_cursors c ON c.subscription_id = $1 AND c.sku = b.sku
WHERE b.last_seq > COALESCE(c.seq, 0) ORDER BY b.sku`, id)
	if err != nil {
		return nil, fmt.Errorf("pending webhook deliveries: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ledger.WebhookCursor])
	if err != nil {
		return nil, fmt.Errorf("pending webhook deliveries: %w", translate(err))
	}
	return out, nil
}

// EventsAfter returns up to limit of sku's ledger events following seq
// without a gap: the projector may write a later seq first, and a
// subscription must not pass an event that is still on its way. Every
// event of a hold carries the hold's deadline: the ledger keeps it on the
// reserved event only, and the end of a hold gets it from there.
func (s *PostgresWebhookStore) EventsAfter(ctx context.Context, sku string, seq int64, limit int) ([]domain.Event, error) {
	var (
		out   []domain.Event
		ended []string // hold ids of the end events in out
	)
	err := scanEvents(ctx, s.pool, func(e domain.Event) error {
		if e.Seq != seq+int64(len(out))+1 {
			return errGap
		}
		if e.HoldID != "" && e.ExpiresAt.IsZero() {
			ended = append(ended, e.HoldID)
		}
		out = append(out, e)
		return nil
	}, `SELECT `+eventColumns+` FROM ledger_entries e WHERE sku = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sku, seq, limit)
	if err != nil && !errors.Is(err, errGap) {
		return nil, err
	}
	if err := fillHoldDeadlines(ctx, s.pool, ended, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fillHoldDeadlines gives the end events of holds in lists (a hold's
// confirmation, release or expiry, whose rows carry no deadline) the
// deadline of the reservation that opened them; ended are their hold ids.
func fillHoldDeadlines(ctx context.Context, q querier, ended []string, lists ...[]domain.Event) error {
	if len(ended) == 0 {
		return nil
	}
	rows, err := q.Query(ctx, `SELECT hold_id::text, expires_at FROM ledger_entries
WHERE hold_id = ANY($1::uuid[]) AND type = 'reserved'`, ended)
	if err != nil {
		return fmt.Errorf("read the deadlines of ended holds: %w", translate(err))
	}
	deadlines := map[string]time.Time{}
	var (
		id string
		at time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { deadlines[id] = at; return nil }); err != nil {
		return fmt.Errorf("read the deadlines of ended holds: %w", translate(err))
	}
	for _, events := range lists {
		for i := range events {
			if events[i].HoldID != "" && events[i].ExpiresAt.IsZero() {
				events[i].ExpiresAt = deadlines[events[i].HoldID]
			}
		}
	}
	return nil
}

// errGap stops a scan at the first missing seq.
var errGap = errors.New("gap in the ledger")

// AdvanceCursor records that subscription id has every event of sku up
// to seq. A cursor never moves back; a deleted subscription records nothing.
func (s *PostgresWebhookStore) AdvanceCursor(ctx context.Context, id, sku string, seq int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_cursors AS c (subscription_id, sku, seq)
SELECT id, $2, $3 FROM webhook_subscriptions WHERE id = $1
ON CONFLICT (subscription_id, sku) DO UPDATE SET seq = GREATEST(c.seq, EXCLUDED.seq)`, id, sku, seq)
	if err != nil {
		return fmt.Errorf("advance webhook cursor: %w", translate(err))
	}
	return nil
}
