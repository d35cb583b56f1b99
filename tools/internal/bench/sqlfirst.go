package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgTarget deducts in PostgreSQL first: per attempt one transaction with a
// hot-row UPDATE guarded by num >= qty and an order insert guarded by
// UNIQUE (sku, user_id). Its tables live in their own schema, pgSchema, and
// every statement names it, so it never touches the ledger's tables nor
// creates anything on the database's search_path.
type pgTarget struct {
	pool  *pgxpool.Pool
	sku   string
	stock int64
	conns int32
}

// pgSchema holds the SQL-first tables.
const pgSchema = "invledger_bench"

const pgBenchSchema = `
CREATE SCHEMA IF NOT EXISTS invledger_bench;
CREATE TABLE IF NOT EXISTS invledger_bench.bench_stock (
  sku text PRIMARY KEY,
  num bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS invledger_bench.bench_orders (
  id bigserial PRIMARY KEY,
  sku text NOT NULL,
  user_id text NOT NULL,
  request_id text NOT NULL,
  qty bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (sku, user_id)
)`

// newPGTarget opens a pool of maxConns connections (0: one per client, as
// far as the server's max_connections allows) and creates the bench tables.
func newPGTarget(ctx context.Context, databaseURL string, clients, maxConns int) (*pgTarget, error) {
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url (INVLEDGER_DATABASE_URL): %w", err)
	}
	probe, err := pgx.ConnectConfig(ctx, poolCfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s:%d: %w (check --database-url / INVLEDGER_DATABASE_URL)", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, err)
	}
	defer probe.Close(ctx)
	if _, err := probe.Exec(ctx, pgBenchSchema); err != nil {
		return nil, fmt.Errorf("create %s.bench_stock and bench_orders: %w", pgSchema, err)
	}
	if maxConns == 0 {
		var free int
		err := probe.QueryRow(ctx, `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
			- (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int`).Scan(&free)
		if err != nil {
			return nil, fmt.Errorf("read max_connections: %w", err)
		}
		maxConns = max(1, min(clients, free-5))
	}
	poolCfg.MaxConns = int32(maxConns)
	poolCfg.MinConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	// Open every connection now, so the run does not measure connecting.
	var wg sync.WaitGroup
	errs := make([]error, maxConns)
	conns := make([]*pgxpool.Conn, maxConns)
	for i := range maxConns {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	if err := errors.Join(errs...); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %d PostgreSQL connections: %w (lower --pg-max-conns or raise max_connections)", maxConns, err)
	}
	return &pgTarget{pool: pool, conns: int32(maxConns)}, nil
}

func (t *pgTarget) name() string { return "pg-direct" }

func (t *pgTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku, t.stock = sku, stock
	_, err := t.pool.Exec(ctx, `INSERT INTO invledger_bench.bench_stock (sku, num) VALUES ($1, $2)`, sku, stock)
	return err
}

func (t *pgTarget) deduct(ctx context.Context, _ *benchWorker, user, requestID string) (o outcome, _ int64, err error) {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return pgOutcome(err), 0, err
	}
	defer func() {
		if o != outSold {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	tag, err := tx.Exec(ctx, `UPDATE invledger_bench.bench_stock SET num = num - $1 WHERE sku = $2 AND num >= $1`, int64(1), t.sku)
	if err != nil {
		return pgOutcome(err), 0, err
	}
	if tag.RowsAffected() == 0 {
		return outSoldOut, 0, nil
	}
	tag, err = tx.Exec(ctx, `INSERT INTO invledger_bench.bench_orders (sku, user_id, request_id, qty) VALUES ($1, $2, $3, $4) ON CONFLICT (sku, user_id) DO NOTHING`,
		t.sku, user, requestID, int64(1))
	if err != nil {
		return pgOutcome(err), 0, err
	}
	if tag.RowsAffected() == 0 {
		// The user has an order: the same request (a retry) or another one.
		_ = tx.Rollback(ctx)
		var prior string
		if err := t.pool.QueryRow(ctx, `SELECT request_id FROM invledger_bench.bench_orders WHERE sku = $1 AND user_id = $2`, t.sku, user).Scan(&prior); err != nil {
			return pgOutcome(err), 0, err
		}
		if prior == requestID {
			return outReplayed, 0, nil
		}
		return outAlready, 0, nil
	}
	if err := tx.Commit(ctx); err != nil {
		return pgOutcome(err), 0, err
	}
	return outSold, 0, nil
}

func pgOutcome(err error) outcome {
	var pgErr *pgconn.PgError
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.As(err, &pgErr) && pgErr.Code == "57014" {
		return outTimeout
	}
	return outError
}

func (t *pgTarget) catchUp(context.Context, time.Duration) (bool, bool, time.Duration, error) {
	return false, false, 0, nil
}

func (t *pgTarget) check(ctx context.Context) (int64, int64, error) {
	var num, orders, units int64
	err := t.pool.QueryRow(ctx, `SELECT s.num, (SELECT count(*) FROM invledger_bench.bench_orders o WHERE o.sku = s.sku),
		(SELECT COALESCE(sum(qty), 0) FROM invledger_bench.bench_orders o WHERE o.sku = s.sku)::bigint FROM invledger_bench.bench_stock s WHERE s.sku = $1`, t.sku).Scan(&num, &orders, &units)
	if err != nil {
		return 0, 0, err
	}
	if t.stock-num != units {
		return units, num, fmt.Errorf("bench_stock says %d sold but bench_orders holds %d units", t.stock-num, units)
	}
	return units, num, nil
}

// close removes the run's rows, so repeated runs do not grow the tables.
func (t *pgTarget) close() {
	if t.sku != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = t.pool.Exec(ctx, `DELETE FROM invledger_bench.bench_orders WHERE sku = $1`, t.sku)
		_, _ = t.pool.Exec(ctx, `DELETE FROM invledger_bench.bench_stock WHERE sku = $1`, t.sku)
	}
	t.pool.Close()
}
