package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/pgstore"
	"github.com/invledger/invledger/adapters/redisinventory"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/migrations"
)

// journalWindow is how long acknowledged receipts are remembered, so a
// Redis crash in everysec mode can name what it lost: the loss window is one
// second, and verification starts a few seconds after the restart.
const journalWindow = 30 * time.Second

// app is the wired application: connections, adapters and the service.
type app struct {
	cfg       Config
	log       *slog.Logger
	redis     redis.UniversalClient
	pool      *pgxpool.Pool
	keys      redisinventory.Keyspace
	runIDs    *redisinventory.RunIDs
	inventory *redisinventory.RedisInventory
	skus      *pgstore.PostgresSKUStore
	ledger    *pgstore.PostgresLedgerStore
	// journal is set only where Redis can lose acknowledged writes
	// (durability everysec); strict mode keeps it off the purchase path.
	journal *ledger.ReceiptJournal
	service *ledger.Service
}

func newLogger(level string) *slog.Logger {
	l, _ := parseLogLevel(level) // validated with the config
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// newRedisClient makes a client for cfg. poolSize 0 means the go-redis
// default. runIDs, if not nil, learns the run_id of every node connected to.
func newRedisClient(cfg Config, poolSize int, runIDs *redisinventory.RunIDs) (redis.UniversalClient, error) {
	if len(cfg.RedisCluster) > 0 {
		opts := &redis.ClusterOptions{Addrs: cfg.RedisCluster, PoolSize: poolSize}
		if runIDs != nil {
			runIDs.AttachCluster(opts)
		}
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url (INVLEDGER_REDIS_URL): %w", err)
	}
	opts.PoolSize = poolSize
	if runIDs != nil {
		runIDs.Attach(opts)
	}
	return redis.NewClient(opts), nil
}

// openApp connects to Redis and PostgreSQL and wires the service. The script
// client's pool is sized for hundreds of concurrent callers: a purchase holds
// a connection for one round trip, and a caller waiting for a connection is
// latency the Lua script never caused.
func openApp(ctx context.Context, cfg Config) (*app, error) {
	a := &app{cfg: cfg, log: newLogger(cfg.LogLevel)}
	var err error
	if a.keys, err = redisinventory.NewKeyspace(cfg.Partitions); err != nil {
		return nil, err
	}
	a.runIDs = redisinventory.NewRunIDs()
	if a.redis, err = newRedisClient(cfg, 64*runtime.GOMAXPROCS(0)+256, a.runIDs); err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.redis.Ping(pingCtx).Err(); err != nil {
		a.Close()
		return nil, fmt.Errorf("cannot reach Redis at %s: %w (check --redis-url / INVLEDGER_REDIS_URL, or run `invledger dev`)", a.redisAddr(), err)
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("--database-url (INVLEDGER_DATABASE_URL): %w", err)
	}
	if poolCfg.MaxConns < 16 {
		poolCfg.MaxConns = 16
	}
	if a.pool, err = pgxpool.NewWithConfig(ctx, poolCfg); err != nil {
		a.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := a.pool.Ping(pingCtx); err != nil {
		a.Close()
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s:%d: %w (check --database-url / INVLEDGER_DATABASE_URL)", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, err)
	}
	a.inventory = redisinventory.NewRedisInventory(a.redis, a.keys, a.runIDs)
	a.skus = pgstore.NewPostgresSKUStore(a.pool)
	a.ledger = pgstore.NewPostgresLedgerStore(a.pool)
	a.service = ledger.NewService(a.inventory, a.skus, a.ledger)
	return a, nil
}

func (a *app) redisAddr() string {
	if len(a.cfg.RedisCluster) > 0 {
		return fmt.Sprint(a.cfg.RedisCluster)
	}
	return a.cfg.RedisURL
}

// checkSchema refuses to run against a database that is not migrated, with
// the command that fixes it.
func (a *app) checkSchema(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(a.pool)
	defer db.Close()
	applied, embedded, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	if applied < embedded {
		return fmt.Errorf("database schema is at version %d, this binary needs %d: run `invledger migrate`", applied, embedded)
	}
	return nil
}

func (a *app) Close() {
	if a.pool != nil {
		a.pool.Close()
	}
	if a.redis != nil {
		_ = a.redis.Close()
	}
}

// migrate applies the embedded migrations to the database at url.
func migrate(ctx context.Context, url string, log *slog.Logger) error {
	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("--database-url (INVLEDGER_DATABASE_URL): %w", err)
	}
	db := stdlib.OpenDB(*poolCfg.ConnConfig)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("cannot reach PostgreSQL at %s:%d: %w", poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, err)
	}
	if err := migrations.Up(ctx, db, log); err != nil {
		return err
	}
	applied, _, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "database schema is up to date", "version", applied)
	return nil
}
