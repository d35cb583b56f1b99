package pgstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/domain"
)

// PostgresExportStore keeps the broker export's cursors (export_cursors)
// and reads the ledger for it, the way the webhook deliverer does.
type PostgresExportStore struct {
	pool   *pgxpool.Pool
	events *PostgresWebhookStore
}

var _ brokerexport.Store = (*PostgresExportStore)(nil)

// NewPostgresExportStore returns a store over pool.
func NewPostgresExportStore(pool *pgxpool.Pool) *PostgresExportStore {
	return &PostgresExportStore{pool: pool, events: NewPostgresWebhookStore(pool)}
}

// Pending lists the SKUs whose ledger goes past broker's cursor (a SKU
// without a cursor starts at 0), with the cursor, the ledger's last seq and
// when the first event after the cursor happened.
func (s *PostgresExportStore) Pending(ctx context.Context, broker string) ([]brokerexport.Cursor, error) {
	rows, err := s.pool.Query(ctx, `SELECT b.sku, COALESCE(c.seq, 0), b.last_seq,
	COALESCE((SELECT e.occurred_at FROM ledger_entries e WHERE e.sku = b.sku AND e.seq = COALESCE(c.seq, 0) + 1), 'epoch'::timestamptz)
FROM balances b LEFT JOIN export_cursors c ON c.broker = $1 AND c.sku = b.sku
WHERE b.last_seq > COALESCE(c.seq, 0) ORDER BY b.sku`, broker)
	if err != nil {
		return nil, fmt.Errorf("pending exports: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (brokerexport.Cursor, error) {
		var (
			c  brokerexport.Cursor
			at time.Time
		)
		err := row.Scan(&c.SKU, &c.Seq, &c.LastSeq, &at)
		if at.Unix() > 0 {
			c.Next = at // epoch: the next event is still on its way to the ledger
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("pending exports: %w", translate(err))
	}
	return out, nil
}

// EventsAfter returns up to limit of sku's ledger events following seq,
// stopping at the first gap (see PostgresWebhookStore.EventsAfter).
func (s *PostgresExportStore) EventsAfter(ctx context.Context, sku string, seq int64, limit int) ([]domain.Event, error) {
	return s.events.EventsAfter(ctx, sku, seq, limit)
}

// EventsAfterEach reads, in one query, the events following each read's
// After, up to its Limit, each SKU's stopping at its first gap (see
// PostgresWebhookStore.EventsAfter); out[i] answers reads[i]. The reads'
// SKUs are distinct.
func (s *PostgresExportStore) EventsAfterEach(ctx context.Context, reads []brokerexport.Read) ([][]domain.Event, error) {
	var (
		out    = make([][]domain.Event, len(reads))
		skus   = make([]string, len(reads))
		afters = make([]int64, len(reads))
		limits = make([]int32, len(reads))
		index  = make(map[string]int, len(reads))
		cut    = make([]bool, len(reads)) // a gap ended the read
		ended  []string
	)
	for i, r := range reads {
		skus[i], afters[i], limits[i], index[r.SKU] = r.SKU, r.After, int32(r.Limit), i
	}
	err := scanEvents(ctx, s.pool, func(e domain.Event) error {
		i, ok := index[e.SKU]
		if !ok || cut[i] {
			return nil
		}
		if e.Seq != reads[i].After+int64(len(out[i]))+1 {
			cut[i] = true
			return nil
		}
		if e.HoldID != "" && e.ExpiresAt.IsZero() {
			ended = append(ended, e.HoldID)
		}
		out[i] = append(out[i], e)
		return nil
	}, `SELECT `+eventColumns+` FROM unnest($1::text[], $2::bigint[], $3::int[]) WITH ORDINALITY AS r(sku, after, lim, i)
CROSS JOIN LATERAL (SELECT * FROM ledger_entries l WHERE l.sku = r.sku AND l.seq > r.after ORDER BY l.seq LIMIT r.lim) e
ORDER BY r.i, e.seq`, skus, afters, limits)
	if err != nil {
		return nil, err
	}
	if err := fillHoldDeadlines(ctx, s.pool, ended, out...); err != nil {
		return nil, err
	}
	return out, nil
}

// AdvanceCursors records, in one statement, that broker confirmed every
// event of each SKU of to up to its seq. A cursor never moves back.
func (s *PostgresExportStore) AdvanceCursors(ctx context.Context, broker string, to map[string]int64) error {
	if len(to) == 0 {
		return nil
	}
	// In SKU order, so that two writers (a leader that has not yet
	// noticed it lost its lock, and its successor) lock rows in one order.
	skus := slices.Sorted(maps.Keys(to))
	seqs := make([]int64, len(skus))
	for i, sku := range skus {
		seqs[i] = to[sku]
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO export_cursors AS c (broker, sku, seq)
SELECT $1, sku, seq FROM unnest($2::text[], $3::bigint[]) AS t(sku, seq)
ON CONFLICT (broker, sku) DO UPDATE SET seq = GREATEST(c.seq, EXCLUDED.seq), updated_at = now()`, broker, skus, seqs)
	if err != nil {
		return fmt.Errorf("advance export cursors: %w", translate(err))
	}
	return nil
}

// FirstSeqs returns, for every SKU with an event that happened at or after
// since, the seq of the first such event: where a replay from a time
// starts.
func (s *PostgresExportStore) FirstSeqs(ctx context.Context, since time.Time) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku, min(seq) FROM ledger_entries WHERE occurred_at >= $1 GROUP BY sku`, since)
	if err != nil {
		return nil, fmt.Errorf("replay start: %w", translate(err))
	}
	out := map[string]int64{}
	var (
		sku string
		seq int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&sku, &seq}, func() error { out[sku] = seq; return nil }); err != nil {
		return nil, fmt.Errorf("replay start: %w", translate(err))
	}
	return out, nil
}

// Lags returns, per broker with a cursor, how many ledger events it has
// not confirmed and when its export last recorded a confirmation.
func (s *PostgresExportStore) Lags(ctx context.Context) ([]brokerexport.Lag, error) {
	rows, err := s.pool.Query(ctx, `SELECT br.broker, COALESCE(sum(GREATEST(b.last_seq - COALESCE(c.seq, 0), 0)), 0), br.updated
FROM (SELECT broker, max(updated_at) AS updated FROM export_cursors GROUP BY broker) br
CROSS JOIN balances b LEFT JOIN export_cursors c ON c.broker = br.broker AND c.sku = b.sku
GROUP BY br.broker, br.updated ORDER BY br.broker`)
	if err != nil {
		return nil, fmt.Errorf("export lags: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[brokerexport.Lag])
	if err != nil {
		return nil, fmt.Errorf("export lags: %w", translate(err))
	}
	return out, nil
}
