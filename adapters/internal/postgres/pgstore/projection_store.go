package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
)

// The projector ports it implements are asserted in ports_test.go:
// importing package projector here would link Watermill and go-redis into
// every user of pgstore.

// PostgresProjectionStore is where the projector writes: it appends events
// to ledger_entries, moving the balances projection in the same
// transaction, and keeps the entries that cannot be projected in
// dead_letters.
type PostgresProjectionStore struct {
	pool *pgxpool.Pool
}

// NewPostgresProjectionStore returns a store over pool.
func NewPostgresProjectionStore(pool *pgxpool.Pool) *PostgresProjectionStore {
	return &PostgresProjectionStore{pool: pool}
}

// AppendBatch inserts events in one transaction and moves their SKUs'
// balances by the deltas of the rows actually inserted. Events already in the
// ledger (same event_id) are skipped, so redelivery and replays are harmless,
// and the outcome does not depend on the order of events. It returns how many
// rows of each type were inserted.
func (s *PostgresProjectionStore) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	return appendEvents(ctx, s.pool, events)
}

// appendEvents is AppendBatch for every store that appends to the ledger.
func appendEvents(ctx context.Context, pool *pgxpool.Pool, events []domain.Event) (map[domain.EventType]int, error) {
	n := len(events)
	var (
		ids, skus, types, streamIDs      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		seqs, deltas, qtys, balances     = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		users, requests, actors, reasons = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		occurred                         = make([]time.Time, n)
		holdIDs, orderIDs                = make([]*string, n), make([]*string, n)
		expires                          = make([]*time.Time, n)
	)
	for i, e := range events {
		ids[i], skus[i], types[i], streamIDs[i] = e.ID, e.SKU, string(e.Type), e.StreamID
		seqs[i], deltas[i], qtys[i], balances[i] = e.Seq, e.Delta, e.Qty, e.Balance
		users[i], requests[i], actors[i], reasons[i] = nullable(e.User), nullable(e.RequestID), nullable(e.Actor), nullable(e.Reason)
		occurred[i] = e.OccurredAt
		holdIDs[i], orderIDs[i] = nullable(e.HoldID), nullable(e.OrderID)
		if !e.ExpiresAt.IsZero() {
			expires[i] = &e.ExpiresAt
		}
	}
	// Balances are locked in sku order so that concurrent batches cannot deadlock.
	// The uuid columns travel as text[]: pgx has no binary encoding of a
	// []string as uuid[], and tries it first, formatting the whole array
	// into the error it then discards.
	rows, err := pool.Query(ctx, `
WITH ins AS (
    INSERT INTO ledger_entries (event_id, sku, seq, type, delta, qty, balance_after,
                                user_id, request_id, actor, reason, occurred_at, stream_id,
                                hold_id, order_id, expires_at)
    SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[],
                         $7::bigint[], $8::text[], $9::text[], $10::text[], $11::text[],
                         $12::timestamptz[], $13::text[],
                         $14::text[]::uuid[], $15::text[], $16::timestamptz[])
    ON CONFLICT (event_id) DO NOTHING
    RETURNING sku, seq, delta, type, `+heldDelta+` AS held
), moved AS (
    INSERT INTO balances AS b (sku, balance, held, last_seq, updated_at)
    SELECT sku, sum(delta), sum(held), max(seq), now() FROM ins GROUP BY sku ORDER BY sku
    ON CONFLICT (sku) DO UPDATE
        SET balance = b.balance + EXCLUDED.balance,
            held = b.held + EXCLUDED.held,
            last_seq = GREATEST(b.last_seq, EXCLUDED.last_seq),
            updated_at = EXCLUDED.updated_at
)
SELECT type, count(*) FROM ins GROUP BY type`,
		ids, skus, seqs, types, deltas, qtys, balances, users, requests, actors, reasons, occurred, streamIDs,
		holdIDs, orderIDs, expires)
	if err != nil {
		return nil, fmt.Errorf("append %d events: %w", n, translate(err))
	}
	inserted := map[domain.EventType]int{}
	var (
		typ   string
		count int
	)
	_, err = pgx.ForEachRow(rows, []any{&typ, &count}, func() error {
		inserted[domain.EventType(typ)] = count
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("append %d events: %w", n, translate(err))
	}
	return inserted, nil
}

// heldDelta is how a ledger row moves its SKU's held units: a reserve
// holds its qty, the end of a hold lets it go.
const heldDelta = `CASE WHEN type = 'reserved' THEN qty WHEN type IN ('confirmed', 'cancelled', 'expired') THEN -qty ELSE 0 END`

// AddDeadLetter records a stream entry, or event event of one (0 for a
// whole entry), that cannot be projected. Recording the same one again is a
// no-op.
func (s *PostgresProjectionStore) AddDeadLetter(ctx context.Context, stream, streamID string, event int, fields map[string]string, reason string) error {
	_, err := s.pool.Exec(ctx,
		`INSERT INTO dead_letters (stream, stream_id, event, fields, error) VALUES ($1, $2, $3, $4, $5)
		 ON CONFLICT (stream, stream_id, event) DO NOTHING`,
		stream, streamID, event, fields, reason)
	if err != nil {
		return fmt.Errorf("record dead letter %s %s event %d: %w", stream, streamID, event, translate(err))
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
