package stacktest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections/streamentry"
)

// Stack is a migrated database, a private Redis and the application over
// them, wired by app.New exactly as serve wires it. The adapter fields are
// the application's own, named for the tests' convenience.
type Stack struct {
	// Redis is the private redis-server; nil WithRedisCluster or WithSentinel.
	Redis *localstack.RedisServer
	// Cluster is the private Redis Cluster, set only WithRedisCluster.
	Cluster *localstack.RedisCluster
	// Sentinel is the private Sentinel-managed master and replica, set only
	// WithSentinel.
	Sentinel *localstack.SentinelSet
	// Postgres is set only WithPrivatePostgres; the shared server must not be stopped.
	Postgres *localstack.PostgresServer
	App      *app.Application
	// RedisClient is the application's client of Redis; nil WithRedisCluster
	// (App.Redis is then a *redis.ClusterClient).
	RedisClient  *redis.Client
	DatabaseURL  string
	Pool         *pgxpool.Pool
	Keyspace     Keys
	NodeRunWatch NodeRunWatch
	Inventory    Inventory
	// InventoryArchiver, ReconcileSource and NodeRuns are the other Redis
	// adapters, over the same client.
	InventoryArchiver ledger.InventoryArchiver
	ReconcileSource   reconcile.Inventory
	NodeRuns          NodeRuns
	SKUs              SKUs
	Ledger            Ledger
	// Projection is the projector's store: the ledger's writer and its
	// dead letters.
	Projection      ProjectorStore
	Audit           ledger.AuditStore
	Snapshots       reconcile.LedgerView
	Reconciliations reconcile.RunStore
	Archives        ledger.BuyerArchiveStore
	Operations      ledger.OperationLog
	// Seals is the ledger's tamper-evident chain; ProjectStreams seals it.
	Seals Seals
	// Service is measured, as serve's is, and journals receipts only when
	// Redis runs appendfsync everysec, the one mode that can lose them.
	Service *ledger.Service
	// Journal is nil unless Redis runs appendfsync everysec.
	Journal *ledger.ReceiptJournal
}

// Option changes how New builds the stack.
type Option func(*options)

type options struct {
	redis           []func(*localstack.RedisConfig)
	app             []func(*app.Config)
	privatePostgres bool
	cluster         []func(*localstack.ClusterConfig)
	sentinel        bool
}

// WithSentinel runs the stack on a private Sentinel-managed master and
// replica, which the application reaches through the Sentinel.
func WithSentinel() Option { return func(o *options) { o.sentinel = true } }

// WithRedisCluster runs the stack on a private Redis Cluster (3 masters
// unless f says otherwise) instead of one redis-server.
func WithRedisCluster(f func(*localstack.ClusterConfig)) Option {
	return func(o *options) { o.cluster = append(o.cluster, f) }
}

// WithPrivatePostgres gives the stack its own PostgreSQL server, for tests
// that stop or kill it.
func WithPrivatePostgres() Option { return func(o *options) { o.privatePostgres = true } }

// WithRedisConfig changes the private Redis server's configuration.
func WithRedisConfig(f func(*localstack.RedisConfig)) Option {
	return func(o *options) { o.redis = append(o.redis, f) }
}

// WithAppConfig changes the application's configuration before app.New,
// e.g. a short RedisTimeout or a logger the test reads.
func WithAppConfig(f func(*app.Config)) Option {
	return func(o *options) { o.app = append(o.app, f) }
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
	s := &Stack{}
	switch {
	case o.cluster != nil:
		s.Cluster = localstacktest.RedisCluster(t, o.cluster...)
	case o.sentinel:
		s.Sentinel = localstacktest.Sentinel(t)
	default:
		s.Redis = localstacktest.Redis(t, o.redis...)
	}
	if o.privatePostgres {
		s.Postgres = localstacktest.PrivatePostgres(t)
		s.DatabaseURL = s.Postgres.URL("postgres")
	} else {
		s.DatabaseURL = localstacktest.Postgres(t)
	}

	redisCfg := localstack.RedisConfig{}
	for _, f := range o.redis {
		f(&redisCfg)
	}
	durability := app.DurabilityStrict
	if redisCfg.AppendFsync == "everysec" {
		durability = app.DurabilityEverysec
	}
	Migrate(t, s.DatabaseURL)
	// Tests fire thousands of goroutines under the race detector on two
	// cores, where waiting for one of the pool's connections alone can take
	// seconds: the purchase deadline is generous here, and a test of the
	// deadline itself sets a short one WithAppConfig.
	// Webhook receivers of tests listen on 127.0.0.1, which serve refuses
	// by default: the stack allows WebhookAllowNets, and a test of the
	// refusal clears them WithAppConfig.
	cfg := app.Config{DatabaseURL: s.DatabaseURL, Durability: durability,
		RedisPoolSize: 256, RedisTimeout: 10 * time.Second, WebhookAllowNets: WebhookAllowNets, Logger: quiet}
	switch {
	case s.Cluster != nil:
		cfg.RedisCluster = s.Cluster.Addrs()
	case s.Sentinel != nil:
		cfg.RedisSentinels, cfg.RedisSentinelMaster = []string{s.Sentinel.Addr()}, s.Sentinel.MasterName()
	default:
		cfg.RedisURL = s.Redis.URL()
	}
	for _, f := range o.app {
		f(&cfg)
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatalf("open the application: %v", err)
	}
	t.Cleanup(a.Close)
	s.App, s.Pool, s.Keyspace, s.NodeRunWatch = a, a.Pool, approot.Of(a).Keys, approot.Of(a).NodeRunWatch
	s.RedisClient, _ = a.Redis.(*redis.Client)
	ad := approot.Of(a).Adapters
	s.Inventory, s.InventoryArchiver = ad.Inventory, ad.Archiver
	s.ReconcileSource, s.NodeRuns = ad.ReconcileSource, ad.NodeRuns
	s.SKUs, s.Ledger, s.Projection = ad.SKUs, ad.Ledger, ad.Projection
	s.Audit, s.Snapshots, s.Reconciliations, s.Archives = ad.Audit, ad.Snapshots, ad.Reconciliations, ad.BuyerArchives
	s.Seals, s.Operations = ad.Seals, ad.Operations
	s.Service, s.Journal = a.Service, a.Journal
	return s
}

// WebhookAllowNets are the internal networks a stack's webhooks may reach:
// the loopback network its tests' receivers listen on.
var WebhookAllowNets = []string{"127.0.0.0/8"}

// Migrate applies every migration to the database at url.
func Migrate(t testing.TB, url string) {
	t.Helper()
	if err := app.Migrate(context.Background(), url, quiet); err != nil {
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
	// A Redis that cannot take writes for a moment (a Sentinel master
	// whose replicas' acknowledgements lag on a loaded machine answers
	// NOREPLICAS) is unavailable, not broken: the warm is tried again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Service.Warm(ctx, sku)
		if err == nil {
			return
		}
		if !errors.Is(err, domain.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("warm sku %s: %v", sku, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StreamEvents returns the fields of every event of the SKU's partition
// stream that belongs to the SKU, in stream order (the events of an entry
// in their order), one field per value (event_id, type, sku, seq, qty,
// delta, balance, user, request_id, actor, reason). An entry that cannot
// be decoded, a dead letter, keeps its raw fields, and belongs to the SKU
// by its field sku.
func (s *Stack) StreamEvents(t testing.TB, sku string) []map[string]any {
	t.Helper()
	msgs, err := s.App.Redis.XRange(context.Background(), s.Keyspace.SKUStreamKey(sku), "-", "+").Result()
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	var out []map[string]any
	for _, m := range msgs {
		events, err := streamentry.ParseEvents(streamentry.MessageFields(m))
		if err != nil && m.Values["sku"] == sku {
			out = append(out, m.Values)
		}
		for _, e := range events {
			if e.SKU != sku {
				continue
			}
			f := map[string]any{"event_id": e.ID, "type": string(e.Type), "sku": e.SKU, "seq": strconv.FormatInt(e.Seq, 10),
				"qty": strconv.FormatInt(e.Qty, 10), "delta": strconv.FormatInt(e.Delta, 10), "balance": strconv.FormatInt(e.Balance, 10)}
			for k, v := range map[string]string{"user": e.User, "request_id": e.RequestID, "actor": e.Actor, "reason": e.Reason} {
				if v != "" {
					f[k] = v
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// ClusterSKUs creates and warms one SKU per master of the stack's Redis
// Cluster, each starting with prefix and holding stock, and returns them
// keyed by the master's address, and in a slice in the order of the
// cluster's nodes: a test that kills or moves one master knows which SKUs
// it holds.
func (s *Stack) ClusterSKUs(t testing.TB, prefix string, stock int64) (byMaster map[string]string, skus []string) {
	t.Helper()
	byMaster = map[string]string{}
	for i := 0; len(byMaster) < s.Cluster.Masters() && i < 1000; i++ {
		sku := prefix + strconv.Itoa(i)
		if addr := s.MasterOf(t, sku).Addr(); byMaster[addr] == "" {
			byMaster[addr] = sku
		}
	}
	for _, n := range s.Cluster.Nodes {
		if sku := byMaster[n.Addr()]; sku != "" {
			s.SKU(t, sku, stock, 1)
			skus = append(skus, sku)
		}
	}
	return byMaster, skus
}

// MasterOf returns the node of the stack's Redis Cluster that serves sku.
func (s *Stack) MasterOf(t testing.TB, sku string) *localstack.RedisServer {
	t.Helper()
	node, err := s.Cluster.MasterFor(context.Background(), s.Keyspace.SKUKey(sku))
	if err != nil {
		t.Fatalf("master of %s: %v", sku, err)
	}
	return node
}

// ReceiptAt is the key and field of request id req's receipt in sku, where
// the layout its hash names keeps it: for tests that read or break it.
func (s *Stack) ReceiptAt(t testing.TB, sku, req string) (key, field string) {
	t.Helper()
	return s.Keyspace.ReceiptAt(sku, s.layoutOf(t, sku), req)
}

// CountAt is the key and field of user's count of units held in sku, as
// ReceiptAt.
func (s *Stack) CountAt(t testing.TB, sku, user string) (key, field string) {
	t.Helper()
	return s.Keyspace.CountAt(sku, s.layoutOf(t, sku), user)
}

func (s *Stack) layoutOf(t testing.TB, sku string) string {
	t.Helper()
	layout, err := redisinventory.LayoutField(context.Background(), s.App.Redis, s.Keyspace.SKUKey(sku))
	if err != nil {
		t.Fatal(err)
	}
	return layout
}

// Receipts reads sku's receipts, request id to receipt, where the layout
// its hash names keeps them (docs/storage.md); a one-hash SKU's count of
// them must match, or the test fails.
func (s *Stack) Receipts(t testing.TB, sku string) map[string]string {
	t.Helper()
	key, prefix := s.ReceiptAt(t, sku, "")
	return s.records(t, sku, key, prefix, "receipts")
}

// Counts reads sku's buyers' counts, user to units held, as Receipts.
func (s *Stack) Counts(t testing.TB, sku string) map[string]string {
	t.Helper()
	key, prefix := s.CountAt(t, sku, "")
	return s.records(t, sku, key, prefix, "buyers")
}

// records reads the fields of key that start with prefix, prefix cut; a
// prefix means a one-hash SKU, whose field counter counts them.
func (s *Stack) records(t testing.TB, sku, key, prefix, counter string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	match := ""
	if prefix != "" {
		match = prefix + "*"
	}
	it := s.App.Redis.HScan(ctx, key, 0, match, 1000).Iterator()
	for it.Next(ctx) {
		field := it.Val()
		if it.Next(ctx) {
			out[strings.TrimPrefix(field, prefix)] = it.Val()
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("read the %s of %s: %v", counter, sku, err)
	}
	if prefix != "" {
		if n, err := s.App.Redis.HGet(ctx, key, counter).Int(); err != nil || n != len(out) {
			t.Fatalf("%s counts %d %s (%v), and holds %d", sku, n, counter, err, len(out))
		}
	}
	return out
}
