package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/ledger/reconcile"
)

var _ reconcile.RunStore = (*PostgresReconciliationStore)(nil)

// PostgresReconciliationStore keeps every reconciliation run and its
// findings in reconciliation_runs and reconciliation_findings. The figures
// of a finding are stored as storedFiguresV1, never as the reconcile types
// themselves, so renaming a Go field strands no stored history.
type PostgresReconciliationStore struct {
	pool *pgxpool.Pool
}

// NewPostgresReconciliationStore returns a store over pool.
func NewPostgresReconciliationStore(pool *pgxpool.Pool) *PostgresReconciliationStore {
	return &PostgresReconciliationStore{pool: pool}
}

// RecordRun stores a reconciliation run and its findings in one transaction.
func (s *PostgresReconciliationStore) RecordRun(ctx context.Context, r reconcile.Report, runErr error) (int64, error) {
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
			before, err := json.Marshal(newStoredFigures(f.Before, f.MissingSeqs))
			if err != nil {
				return err
			}
			var after []byte
			if f.After != nil {
				if after, err = json.Marshal(newStoredFigures(*f.After, nil)); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO reconciliation_findings (run_id, sku, class, detail, before, after, repaired, repair_error)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, id, f.SKU, string(f.Class), f.Detail, before, after, f.Repaired,
				nullable(f.RepairError)); err != nil {
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

// findingRow is how Runs' query aggregates one reconciliation_findings row;
// its keys are private to that query.
type findingRow struct {
	SKU         string          `json:"sku"`
	Class       string          `json:"class"`
	Detail      string          `json:"detail"`
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	Repaired    bool            `json:"repaired"`
	RepairError *string         `json:"repair_error"`
}

// Runs returns up to limit reconciliation runs with their findings, newest
// first: the newest ones when before is 0, else those with an id below
// before (keyset paging on the primary key).
func (s *PostgresReconciliationStore) Runs(ctx context.Context, before int64, limit int) ([]reconcile.RecordedRun, error) {
	rows, err := s.pool.Query(ctx, `
SELECT r.id, r.trigger, to_char(r.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       to_char(r.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), r.checked, r.drifts, r.repaired, r.error,
       COALESCE(json_agg(json_build_object('sku', f.sku, 'class', f.class, 'detail', f.detail, 'before', f.before,
                'after', f.after, 'repaired', f.repaired, 'repair_error', f.repair_error) ORDER BY f.id)
                FILTER (WHERE f.id IS NOT NULL), '[]')
FROM (SELECT * FROM reconciliation_runs WHERE $2::bigint = 0 OR id < $2 ORDER BY id DESC LIMIT $1) r
LEFT JOIN reconciliation_findings f ON f.run_id = r.id
GROUP BY r.id, r.trigger, r.started_at, r.finished_at, r.checked, r.drifts, r.repaired, r.error
ORDER BY r.id DESC`, limit, before)
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", translate(err))
	}
	var (
		out      []reconcile.RecordedRun
		run      reconcile.RecordedRun
		findings []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&run.ID, &run.Trigger, &run.Started, &run.Finished, &run.Checked, &run.Drifts, &run.Repaired, &run.Error, &findings}, func() error {
		r := run
		var stored []findingRow
		if err := json.Unmarshal(findings, &stored); err != nil {
			return fmt.Errorf("findings of run %d: %w", r.ID, err)
		}
		r.Findings = make([]reconcile.RecordedFinding, len(stored))
		for i, f := range stored {
			rf, err := f.recorded()
			if err != nil {
				return fmt.Errorf("finding %d of run %d: %w", i, r.ID, err)
			}
			r.Findings[i] = rf
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", translate(err))
	}
	return out, nil
}

// recorded maps a stored finding onto reconcile's.
func (f findingRow) recorded() (reconcile.RecordedFinding, error) {
	before, err := loadStoredFigures(f.Before)
	if err != nil {
		return reconcile.RecordedFinding{}, fmt.Errorf("before: %w", err)
	}
	rf := reconcile.RecordedFinding{
		SKU: f.SKU, Class: reconcile.Class(f.Class), Detail: f.Detail,
		Before:   reconcile.RecordedFigures{Figures: before.figures(), MissingSeqs: before.missingSeqs()},
		Repaired: f.Repaired, RepairError: f.RepairError,
	}
	if len(f.After) > 0 && string(f.After) != "null" {
		after, err := loadStoredFigures(f.After)
		if err != nil {
			return reconcile.RecordedFinding{}, fmt.Errorf("after: %w", err)
		}
		figures := after.figures()
		rf.After = &figures
	}
	return rf, nil
}
