// Package stacktest assembles the whole purchase stack over private Redis and
// PostgreSQL servers, for integration tests of every layer.
package stacktest

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/localstack"
	"github.com/invledger/invledger/adapters/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/pgstore"
	"github.com/invledger/invledger/adapters/redisinventory"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/migrations"
)

// Stack is a migrated database, a private Redis and a ledger.Service over them.
type Stack struct {
	Redis *localstack.RedisServer
	// Postgres is set only WithPrivatePostgres; the shared server must not be stopped.
	Postgres    *localstack.PostgresServer
	RedisClient *redis.Client
	DatabaseURL string
	Pool        *pgxpool.Pool
	Keyspace    redisinventory.Keyspace
	RunIDs      *redisinventory.RunIDs
	Inventory   *redisinventory.RedisInventory
	// InventoryRestorer, InventoryArchiver, ReconcileSource and Epoch are
	// the other Redis adapters, over the same client.
	InventoryRestorer *redisinventory.RedisRestorer
	InventoryArchiver *redisinventory.RedisArchiver
	ReconcileSource   *redisinventory.RedisReconcileSource
	Epoch             *redisinventory.RedisEpoch
	SKUs              *pgstore.PostgresSKUStore
	Ledger            *pgstore.PostgresLedgerStore
	Projection        *pgstore.PostgresProjectionStore
	Balances          *pgstore.PostgresBalanceStore
	Audit             *pgstore.PostgresAuditStore
	Snapshots         *pgstore.PostgresLedgerSnapshotStore
	Reconciliations   *pgstore.PostgresReconciliationStore
	Archives          *pgstore.PostgresBuyerArchiveStore
	Service           *ledger.Service
	// Journal records the deductions Service acknowledged, as serve's does.
	Journal *ledger.ReceiptJournal
}

// Option changes how New builds the stack.
type Option func(*options)

type options struct {
	redis           []func(*localstack.RedisConfig)
	privatePostgres bool
}

// WithPrivatePostgres gives the stack its own PostgreSQL server, for tests
// that stop or kill it.
func WithPrivatePostgres() Option { return func(o *options) { o.privatePostgres = true } }

// WithRedisConfig changes the private Redis server's configuration.
func WithRedisConfig(f func(*localstack.RedisConfig)) Option {
	return func(o *options) { o.redis = append(o.redis, f) }
}

// New starts Redis, creates and migrates a fresh database, and wires the
// service. Everything is torn down when the test ends.
func New(t testing.TB, opts ...Option) *Stack {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	s := &Stack{Redis: localstacktest.Redis(t, o.redis...)}
	if o.privatePostgres {
		s.Postgres = localstacktest.PrivatePostgres(t)
		s.DatabaseURL = s.Postgres.URL("postgres")
	} else {
		s.DatabaseURL = localstacktest.Postgres(t)
	}

	s.RunIDs = redisinventory.NewRunIDs()
	redisOpts := &redis.Options{Addr: s.Redis.Addr(), PoolSize: 256}
	s.RunIDs.Attach(redisOpts)
	s.RedisClient = redis.NewClient(redisOpts)
	t.Cleanup(func() { _ = s.RedisClient.Close() })

	Migrate(t, s.DatabaseURL)
	pool, err := pgxpool.New(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	t.Cleanup(pool.Close)
	s.Pool = pool

	if s.Keyspace, err = redisinventory.NewKeyspace(redisinventory.DefaultPartitions); err != nil {
		t.Fatal(err)
	}
	s.Inventory = redisinventory.NewRedisInventory(s.RedisClient, s.Keyspace, s.RunIDs)
	s.InventoryRestorer = redisinventory.NewRedisRestorer(s.RedisClient, s.Keyspace)
	s.InventoryArchiver = redisinventory.NewRedisArchiver(s.RedisClient, s.Keyspace)
	if s.ReconcileSource, err = redisinventory.NewRedisReconcileSource(s.RedisClient, s.Keyspace, s.RunIDs, redisinventory.ReconcileSourceConfig{}); err != nil {
		t.Fatal(err)
	}
	s.Epoch = redisinventory.NewRedisEpoch(s.RedisClient)
	s.SKUs = pgstore.NewPostgresSKUStore(pool)
	s.Ledger = pgstore.NewPostgresLedgerStore(pool)
	s.Projection = pgstore.NewPostgresProjectionStore(pool)
	s.Balances = pgstore.NewPostgresBalanceStore(pool)
	s.Audit = pgstore.NewPostgresAuditStore(pool)
	s.Snapshots = pgstore.NewPostgresLedgerSnapshotStore(pool)
	s.Reconciliations = pgstore.NewPostgresReconciliationStore(pool)
	s.Archives = pgstore.NewPostgresBuyerArchiveStore(pool)
	s.Journal = ledger.NewReceiptJournal(30 * time.Second)
	s.Service = ledger.NewService(s.Journal.Wrap(s.Inventory), s.SKUs, s.Ledger)
	return s
}

// Migrate applies every migration to the database at url.
func Migrate(t testing.TB, url string) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	if err := migrations.Up(context.Background(), db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// SKU creates and warms a SKU, failing the test on any error.
func (s *Stack) SKU(t testing.TB, sku string, stock, limit int64) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: stock, PerUserLimit: limit}); err != nil {
		t.Fatalf("create sku %s: %v", sku, err)
	}
	if _, err := s.Service.Warm(ctx, sku); err != nil {
		t.Fatalf("warm sku %s: %v", sku, err)
	}
}

// StreamEvents returns the fields of every entry of the SKU's partition
// stream that belongs to the SKU, in stream order.
func (s *Stack) StreamEvents(t testing.TB, sku string) []map[string]any {
	t.Helper()
	msgs, err := s.RedisClient.XRange(context.Background(), s.Keyspace.SKUStreamKey(sku), "-", "+").Result()
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	var out []map[string]any
	for _, m := range msgs {
		if m.Values["sku"] == sku {
			out = append(out, m.Values)
		}
	}
	return out
}
