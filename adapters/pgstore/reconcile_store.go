package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LedgerSnapshot folds the ledger of skus (nil: every SKU) into stock, seq,
// row count and holders, joined with the balances rows, and tells which of
// eventIDs the ledger holds, all in one REPEATABLE READ snapshot: an event
// committed meanwhile is either in both answers or in neither, so the
// reconciler never counts it twice or not at all.
func (s *PostgresLedgerStore) LedgerSnapshot(ctx context.Context, skus, eventIDs []string) (map[string]domain.LedgerSummary, map[string]bool, error) {
	var (
		sums  map[string]domain.LedgerSummary
		known map[string]bool
	)
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if sums, err = summaries(ctx, tx, skus); err != nil {
			return err
		}
		known, err = knownEventIDs(ctx, tx, eventIDs)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return sums, known, nil
}

func summaries(ctx context.Context, q querier, skus []string) (map[string]domain.LedgerSummary, error) {
	rows, err := q.Query(ctx, `
WITH l AS (
    SELECT sku, sum(delta) AS stock, max(seq) AS seq, count(*) AS n
    FROM ledger_entries WHERE $1::text[] IS NULL OR sku = ANY($1) GROUP BY sku
), h AS (
    SELECT sku, count(*) AS holders FROM (
        SELECT sku, user_id, sum(CASE type WHEN 'deducted' THEN qty ELSE -qty END) AS held
        FROM ledger_entries
        WHERE type IN ('deducted', 'released') AND ($1::text[] IS NULL OR sku = ANY($1))
        GROUP BY sku, user_id
    ) per_user WHERE held > 0 GROUP BY sku
), b AS (
    SELECT sku, balance, last_seq, updated_at FROM balances WHERE $1::text[] IS NULL OR sku = ANY($1)
)
SELECT COALESCE(l.sku, b.sku), COALESCE(l.stock, 0), COALESCE(l.seq, 0), COALESCE(l.n, 0), COALESCE(h.holders, 0),
       b.balance, b.last_seq, b.updated_at
FROM l FULL JOIN b ON b.sku = l.sku LEFT JOIN h ON h.sku = COALESCE(l.sku, b.sku)`, skus)
	if err != nil {
		return nil, fmt.Errorf("fold the ledger: %w", translate(err))
	}
	out := map[string]domain.LedgerSummary{}
	var (
		sku       string
		sum       domain.LedgerSummary
		bal       *int64
		lastSeq   *int64
		updatedAt *time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&sku, &sum.Stock, &sum.Seq, &sum.Count, &sum.Holders, &bal, &lastSeq, &updatedAt}, func() error {
		v := sum
		if bal != nil && lastSeq != nil && updatedAt != nil {
			v.Balance = &domain.LedgerBalance{Stock: *bal, LastSeq: *lastSeq, UpdatedAt: *updatedAt}
		}
		out[sku] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fold the ledger: %w", translate(err))
	}
	return out, nil
}

// KnownEventIDs returns which of ids the ledger holds.
func (s *PostgresLedgerStore) KnownEventIDs(ctx context.Context, ids []string) (map[string]bool, error) {
	return knownEventIDs(ctx, s.pool, ids)
}

func knownEventIDs(ctx context.Context, q querier, ids []string) (map[string]bool, error) {
	known := map[string]bool{}
	if len(ids) == 0 {
		return known, nil
	}
	rows, err := q.Query(ctx, `SELECT event_id::text FROM ledger_entries WHERE event_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up %d event ids: %w", len(ids), translate(err))
	}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { known[id] = true; return nil })
	if err != nil {
		return nil, fmt.Errorf("look up %d event ids: %w", len(ids), translate(err))
	}
	return known, nil
}

// Seqs returns every seq the ledger holds for sku, to name gaps.
func (s *PostgresLedgerStore) Seqs(ctx context.Context, sku string) ([]int64, error) {
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

// RecordRun stores a reconciliation run and its findings in one transaction.
func (s *PostgresLedgerStore) RecordRun(ctx context.Context, r reconcile.Report, runErr error) (int64, error) {
	var errText *string
	if runErr != nil {
		e := runErr.Error()
		errText = &e
	}
	var id int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO reconciliation_runs (trigger, started_at, finished_at, checked, drifts, repaired, error)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
			r.Trigger, r.Started, r.Finished, r.Checked, len(r.Drifts), len(r.Repaired), errText).Scan(&id); err != nil {
			return err
		}
		for _, f := range r.Drifts {
			before, err := json.Marshal(struct {
				reconcile.Figures
				MissingSeqs []reconcile.SeqRange `json:"missing_seqs,omitempty"`
			}{f.Before, f.MissingSeqs})
			if err != nil {
				return err
			}
			var after []byte
			if f.After != nil {
				if after, err = json.Marshal(f.After); err != nil {
					return err
				}
			}
			var repairErr *string
			if f.RepairError != "" {
				repairErr = &f.RepairError
			}
			if _, err := tx.Exec(ctx, `INSERT INTO reconciliation_findings (run_id, sku, class, detail, before, after, repaired, repair_error)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, id, f.SKU, string(f.Class), f.Detail, before, after, f.Repaired, repairErr); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("record reconciliation run: %w", translate(err))
	}
	return id, nil
}

// Runs returns the newest reconciliation runs with their findings.
func (s *PostgresLedgerStore) Runs(ctx context.Context, limit int) ([]reconcile.RecordedRun, error) {
	rows, err := s.pool.Query(ctx, `
SELECT r.id, r.trigger, to_char(r.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       to_char(r.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), r.checked, r.drifts, r.repaired, r.error,
       COALESCE(json_agg(json_build_object('sku', f.sku, 'class', f.class, 'detail', f.detail, 'before', f.before,
                'after', f.after, 'repaired', f.repaired, 'repair_error', f.repair_error) ORDER BY f.id)
                FILTER (WHERE f.id IS NOT NULL), '[]')
FROM (SELECT * FROM reconciliation_runs ORDER BY id DESC LIMIT $1) r
LEFT JOIN reconciliation_findings f ON f.run_id = r.id
GROUP BY r.id, r.trigger, r.started_at, r.finished_at, r.checked, r.drifts, r.repaired, r.error
ORDER BY r.id DESC`, limit)
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", translate(err))
	}
	var out []reconcile.RecordedRun
	var run reconcile.RecordedRun
	var findings []byte
	_, err = pgx.ForEachRow(rows, []any{&run.ID, &run.Trigger, &run.Started, &run.Finished, &run.Checked, &run.Drifts, &run.Repaired, &run.Error, &findings}, func() error {
		r := run
		if err := json.Unmarshal(findings, &r.Findings); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", translate(err))
	}
	return out, nil
}
