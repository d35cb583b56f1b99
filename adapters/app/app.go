package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/httpapi/recovering"
	"github.com/invledger/invledger/adapters/internal/httpapi/requestid"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/internal/redis/refusals"
	"github.com/invledger/invledger/adapters/internal/webhooks/alertwebhook"
	"github.com/invledger/invledger/adapters/internal/webhooks/eventwebhook"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/ledger/seal"
	"github.com/invledger/invledger/migrations"
	"github.com/invledger/invledger/projections"
	"github.com/invledger/invledger/projections/streamentry"
)

// journalWindow is how long acknowledged receipts are remembered in
// everysec mode: the loss window is one second, and verification starts a
// few seconds after a restart.
const journalWindow = 30 * time.Second

// connectTimeout bounds the first contact with each server.
const connectTimeout = 5 * time.Second

// The application services the reconciler calls back into.
var (
	_ reconcile.Restorer        = (*ledger.Recovery)(nil)
	_ reconcile.BalanceRepairer = (*ledger.Recovery)(nil)
	_ reconcile.LossJournal     = (*ledger.ReceiptJournal)(nil)
)

// Metrics are the instruments every component reports to, all registered
// on Config.Registry.
type Metrics struct {
	Registry   *prometheus.Registry
	Inventory  *ledger.InventoryMetrics
	Projection *projections.Metrics
	Reconcile  *reconcile.Metrics
	Seal       *seal.Metrics
	// Unavailable counts the API's 503 answers that ask for a retry, by
	// route pattern and code (unavailable, recovering, unsafe_redis): an
	// outage of Redis or PostgreSQL shows here as answers, not as errors.
	Unavailable *prometheus.CounterVec
	// HTTPRequests counts the API's answers by route pattern and status;
	// HTTPDuration times them by route pattern.
	HTTPRequests *prometheus.CounterVec
	HTTPDuration *prometheus.HistogramVec
	// RedisConfigAssumed is 1 when serve runs with --redis-config=assume.
	RedisConfigAssumed prometheus.Gauge
	// ConsoleSignInFailures counts the console's refused sign-ins by
	// reason (bad_token, gateway_token, throttled): guessing shows here.
	ConsoleSignInFailures *prometheus.CounterVec
}

// Application is invledger wired once: the application services over their
// adapters, as serve, every CLI command, the test stack and library users
// share them.
type Application struct {
	// Service is the purchase path: create, warm, deduct, release, state.
	Service *ledger.Service
	// Holds reserves, confirms and cancels holds; HoldExpiry expires them.
	Holds *ledger.Holds
	// Orders places, confirms and cancels orders of several SKUs, as holds.
	Orders *ledger.Orders
	// HoldExpiry expires the holds past their deadline and settles their
	// orders; every serve with the API runs it.
	HoldExpiry  *ledger.HoldExpiry
	Recovery    *ledger.Recovery
	Archiver    *ledger.Archiver
	Adjustments *ledger.Adjustments
	// DeadLetters lists, replays and resolves what the projector
	// dead-lettered.
	DeadLetters *ledger.DeadLetters
	Auditor     *ledger.Auditor
	// Catalog lists the SKUs with their state in Redis and the ledger.
	Catalog    *ledger.Catalog
	Reconciler *reconcile.Reconciler
	// Sealer seals the ledger's tamper-evident chain; serve runs it with
	// the projector.
	Sealer *seal.Sealer
	// SealKeys are Config.SealKeys, parsed: the Sealer signs with the
	// first, and audit verify checks with them all.
	SealKeys domain.SealKeys
	// Alerts raises findings, dead letters and fenced SKUs as slog ERROR
	// lines and passes them on to Webhook.
	Alerts *reconcile.LogAlerter
	// Webhooks manages the business-event webhook subscriptions; serve
	// delivers them (eventwebhook).
	Webhooks *ledger.Webhooks
	// Journal remembers acknowledged receipts; nil in strict mode, where
	// Redis cannot lose one.
	Journal *ledger.ReceiptJournal

	Metrics Metrics
	Redis   redis.UniversalClient
	Pool    *pgxpool.Pool
	Log     *slog.Logger

	cfg Config
	// parts are the concrete adapters and the helpers built for them, for
	// the packages under adapters/ (approot.Of): typed by internal
	// packages, they stay out of the public API.
	parts approot.Parts
}

func init() {
	approot.Of = func(application any) *approot.Parts { return &application.(*Application).parts }
}

// New connects to PostgreSQL, makes (but does not dial) the Redis client
// and wires every service. Close releases both.
func New(ctx context.Context, cfg Config) (*Application, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Every layer's lines logged for an API request carry its request_id.
	log := slog.New(requestid.LogHandler(cfg.Logger.Handler()))
	a := &Application{cfg: cfg, Log: log}
	a.parts.NodeRunWatch = redisinventory.NewNodeRunWatch()
	var err error
	if a.parts.Keys, err = redisinventory.NewKeyspace(cfg.Partitions); err != nil {
		return nil, err
	}
	a.parts.Keys = a.parts.Keys.WithLayout(redisinventory.SKULayout(cfg.SKULayout))
	if a.SealKeys, err = cfg.sealKeys(); err != nil {
		return nil, err
	}
	if a.Redis, err = newRedisClient(cfg, cfg.RedisPoolSize, a.parts.NodeRunWatch); err != nil {
		return nil, err
	}
	if a.Pool, err = openPool(ctx, cfg.DatabaseURL); err != nil {
		a.Close()
		return nil, err
	}
	if err := a.wire(); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func openPool(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url (INVLEDGER_DATABASE_URL): %w", err)
	}
	// The projector's writers, the reconciler and the API share the pool.
	if poolCfg.MaxConns < 16 {
		poolCfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%w: cannot reach PostgreSQL at %s:%d: %w (check --database-url / INVLEDGER_DATABASE_URL)",
			domain.ErrUnavailable, poolCfg.ConnConfig.Host, poolCfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// wire builds the adapters, the metrics and the services over the open
// connections. Only everysec mode journals receipts; every mode measures.
func (a *Application) wire() error {
	cfg := a.cfg
	ad := &a.parts.Adapters
	var err error
	reg := cfg.Registry
	inventoryMetrics := ledger.NewInventoryMetrics(reg)
	ad.Restorer = redisinventory.NewRedisRestorer(a.Redis, a.parts.Keys)
	ad.Archiver = redisinventory.NewRedisArchiver(a.Redis, a.parts.Keys)
	if ad.ReconcileSource, err = redisinventory.NewRedisReconcileSource(a.Redis, a.parts.Keys, redisinventory.ReconcileSourceConfig{}); err != nil {
		return err
	}
	ad.NodeRuns = redisinventory.NewRedisNodeRuns(a.Redis)
	ad.SKUs = pgstore.NewPostgresSKUStore(a.Pool)
	ad.Ledger = pgstore.NewPostgresLedgerStore(a.Pool)
	ad.Projection = pgstore.NewPostgresProjectionStore(a.Pool)
	ad.Balances = pgstore.NewPostgresBalanceStore(a.Pool)
	ad.Audit = pgstore.NewPostgresAuditStore(a.Pool)
	ad.Snapshots = pgstore.NewPostgresLedgerSnapshotStore(a.Pool)
	ad.Reconciliations = pgstore.NewPostgresReconciliationStore(a.Pool)
	ad.BuyerArchives = pgstore.NewPostgresBuyerArchiveStore(a.Pool)
	ad.Adjustments = pgstore.NewPostgresAdjustmentStore(a.Pool)
	ad.Operations = pgstore.NewPostgresOperationStore(a.Pool)
	ad.DeadLetters = pgstore.NewPostgresDeadLetterStore(a.Pool)
	ad.Idempotency = pgstore.NewPostgresIdempotencyStore(a.Pool)
	ad.ConsoleSessions = pgstore.NewPostgresConsoleSessionStore(a.Pool)
	ad.Seals = pgstore.NewPostgresSealStore(a.Pool)
	ad.Webhooks = pgstore.NewPostgresWebhookStore(a.Pool)
	ad.ReconcilerLeader = pgstore.NewPostgresAdvisoryLock(a.Pool, "reconciler-leader")
	ad.JanitorLeader = pgstore.NewPostgresAdvisoryLock(a.Pool, "janitor-leader")
	ad.RepairLock = pgstore.NewPostgresAdvisoryLock(a.Pool, "reconcile-repair")
	ad.WebhookLeader = pgstore.NewPostgresAdvisoryLock(a.Pool, "event-webhook-leader")

	a.Metrics = Metrics{Registry: reg, Inventory: inventoryMetrics,
		Projection: projections.NewMetrics(reg), Reconcile: reconcile.NewMetrics(reg), Seal: seal.NewMetrics(reg),
		Unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_http_unavailable_total",
			Help: "API answers 503 with Retry-After because a server was unavailable, by route and code (unavailable, recovering, unsafe_redis).",
		}, []string{"route", "code"}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_http_requests_total",
			Help: "API answers by route pattern and HTTP status.",
		}, []string{"route", "status"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "invledger_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route pattern.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"})}
	a.parts.AlertMetrics, a.parts.EventWebhookMetrics, a.parts.ExportMetrics = alertwebhook.NewMetrics(reg), eventwebhook.NewMetrics(reg), brokerexport.NewMetrics(reg)
	a.Metrics.RedisConfigAssumed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "invledger_redis_config_assumed",
		Help: "1 when Redis persistence settings are assumed (--redis-config=assume), not read with CONFIG GET.",
	})
	a.Metrics.ConsoleSignInFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "invledger_console_signin_failures_total",
		Help: "Refused console sign-ins, by reason (bad_token, gateway_token, throttled).",
	}, []string{"reason"})
	reg.MustRegister(a.Metrics.Unavailable, a.Metrics.HTTPRequests, a.Metrics.HTTPDuration, a.Metrics.RedisConfigAssumed,
		a.Metrics.ConsoleSignInFailures)
	a.registerPendingAdjustments(reg)
	a.registerUp(reg)
	a.parts.Recovering = recovering.New(time.Now)
	a.parts.Recovering.Register(reg)

	if cfg.Durability == DurabilityEverysec {
		a.Journal = ledger.NewReceiptJournal(journalWindow)
	}
	a.parts.Egress, _ = cfg.egressGuard() // checked by Validate
	if nets := a.parts.Egress.Nets(); len(nets) > 0 {
		a.Log.Info("webhooks may reach these internal networks (--webhook-allow-nets)", "nets", fmt.Sprint(nets))
	}
	if a.Recovery, err = ledger.NewRecovery(ledger.RecoveryConfig{Ledger: ad.Ledger, SKUs: ad.SKUs, Balances: ad.Balances,
		Redis: ad.Restorer, Records: ad.Restorer, Operations: ad.Operations, ConsumerGroup: projections.ConsumerGroup, Logger: a.Log}); err != nil {
		return err
	}
	// Findings, dead letters and fenced SKUs all alert through one alerter.
	var webhook reconcile.Notifier
	if cfg.AlertWebhook != "" {
		if a.parts.Webhook, err = alertwebhook.NewWebhookNotifier(alertwebhook.Config{URL: cfg.AlertWebhook, Secret: cfg.AlertWebhookSecret, Logger: a.Log,
			Metrics: a.parts.AlertMetrics, Client: a.parts.Egress.Client()}); err != nil {
			return err
		}
		webhook = a.parts.Webhook
	}
	a.Alerts = reconcile.NewLogAlerter(a.Log, webhook)
	var alerter reconcile.Alerter = a.Alerts
	if cfg.Alerter != nil {
		alerter = cfg.Alerter
	}
	rc := reconcile.Config{Inventory: ad.ReconcileSource, Ledger: ad.Snapshots, SKUs: ad.SKUs, Restorer: a.Recovery,
		Rebuilder: a.Recovery, Runs: ad.Reconciliations, Operations: ad.Operations, Alerts: alerter, Metrics: a.Metrics.Reconcile, Logger: a.Log,
		RepairLock: ad.RepairLock}
	if a.Journal != nil {
		rc.Journal = a.Journal
	}
	if a.Reconciler, err = reconcile.New(rc); err != nil {
		return err
	}
	// A corrupt record the purchase path or the sweeper meets is rebuilt
	// by the reconciler.
	if ad.Inventory, err = redisinventory.NewRedisInventory(a.Redis, a.parts.Keys, redisinventory.InventoryConfig{
		Timeout: cfg.RedisTimeout, MaxBatch: cfg.MaxBatch, ObserveBatch: inventoryMetrics.ObservePurchaseBatch,
		BatchesInFlight: cfg.BatchesInFlight, StreamEntries: cfg.StreamEntries,
		ObserveBatchesInFlight: inventoryMetrics.ObservePurchaseBatchesInFlight,
		Corrupt:                a.Reconciler}); err != nil {
		return err
	}
	if ad.Sweeper, err = redisinventory.NewSweeper(a.Redis, a.parts.Keys, redisinventory.SweeperConfig{Corrupt: a.Reconciler}); err != nil {
		return err
	}
	var (
		inventory      ledger.Inventory      = ad.Inventory
		orderInventory ledger.OrderInventory = ad.Inventory
	)
	if a.Journal != nil {
		inventory, orderInventory = a.Journal.Wrap(inventory), a.Journal.WrapOrders(orderInventory)
	}
	a.parts.Refusals = refusals.NewCounter(refusals.DefaultMaxSKUs)
	a.Service = ledger.NewService(a.Metrics.Inventory.Wrap(a.parts.Refusals.Wrap(inventory)), ad.SKUs, ad.Ledger, ad.Operations)
	if a.Webhooks, err = ledger.NewWebhooks(ledger.WebhooksConfig{Store: ad.Webhooks, CheckURL: a.parts.Egress.CheckURL}); err != nil {
		return err
	}
	a.DeadLetters = ledger.NewDeadLetters(ad.DeadLetters, streamentry.ParseEvents, ad.Projection)
	a.Auditor = ledger.NewAuditor(ad.Audit, ad.SKUs, ad.Operations)
	a.Catalog = ledger.NewCatalog(ad.SKUs, ad.Inventory)
	holdInventory := a.Metrics.Inventory.WrapOrders(a.parts.Refusals.WrapOrders(orderInventory))
	if a.Holds, err = ledger.NewHolds(holdInventory, ad.Ledger, cfg.Holds); err != nil {
		return err
	}
	if a.Orders, err = ledger.NewOrders(holdInventory, ad.Ledger, a.Holds, cfg.Orders); err != nil {
		return err
	}
	if a.HoldExpiry, err = ledger.NewHoldExpiry(ledger.HoldExpiryConfig{Holds: ad.Sweeper, Orders: a.Orders,
		Metrics: a.Metrics.Inventory, Logger: a.Log}); err != nil {
		return err
	}
	if a.Archiver, err = ledger.NewArchiver(ledger.ArchiverConfig{Ledger: ad.Ledger, SKUs: ad.SKUs, Inventory: ad.Inventory,
		Redis: ad.Archiver, Archives: ad.BuyerArchives, Operations: ad.Operations, Reconcile: a.ReconcileClean,
		Logger: a.Log}); err != nil {
		return err
	}
	// Each approved adjustment is followed by a reconciliation of its SKU.
	reconcileSKU := func(ctx context.Context, sku string) (int64, error) {
		rep, err := a.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{sku}, Repair: true, Trigger: "adjustment"})
		return rep.RunID, err
	}
	a.Adjustments = ledger.NewAdjustments(ad.Adjustments, ad.Inventory, reconcileSKU, a.Log)
	if a.Sealer, err = seal.New(seal.Config{Store: ad.Seals, Keys: a.SealKeys, Metrics: a.Metrics.Seal, Logger: a.Log}); err != nil {
		return err
	}
	return nil
}

// ReconcileClean reconciles one SKU without repair, recorded as a run
// triggered by "retire", and answers nil only when it found the ledger and
// Redis agreeing with nothing in flight.
func (a *Application) ReconcileClean(ctx context.Context, sku string) error {
	rep, err := a.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{sku}, Trigger: "retire"})
	switch {
	case err != nil:
		return err
	case len(rep.Drifts) > 0:
		return fmt.Errorf("%w: reconciliation %d found %s: %s", ledger.ErrDrift, rep.RunID, rep.Drifts[0].Class, rep.Drifts[0].Detail)
	case rep.Lagging > 0:
		return fmt.Errorf("%w: reconciliation %d found events still in flight", ledger.ErrLedgerBehind, rep.RunID)
	}
	return nil
}

// registerPendingAdjustments exposes the number of adjustments waiting for
// a decision, read from the database at scrape time.
func (a *Application) registerPendingAdjustments(reg prometheus.Registerer) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "invledger_adjustments_pending",
		Help: "Manual stock adjustments waiting for an approver.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := a.parts.Adapters.Adjustments.CountPending(ctx)
		if err != nil {
			a.Log.Warn("count pending adjustments", "err", err)
			return 0
		}
		return float64(n)
	}))
}

// registerUp exposes invledger_redis_up and invledger_postgres_up: 1 when
// the server answers a ping at scrape time, 0 otherwise. Sales need only
// Redis, so a PostgreSQL outage shows here rather than as lost sales.
func (a *Application) registerUp(reg prometheus.Registerer) {
	for name, ping := range map[string]func(context.Context) error{"redis": a.PingRedis, "postgres": a.PingPostgres} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "invledger_" + name + "_up",
			Help: "1 when " + name + " answered a ping at scrape time, 0 otherwise.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if ping(ctx) != nil {
				return 0
			}
			return 1
		}))
	}
}

// NewRegistry returns a metrics registry with the Go runtime, process and
// build-info collectors, as /metrics serves them; go_build_info's version
// label is Version.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newBuildInfoCollector())
	return reg
}

// Config is the configuration a was opened with, defaults filled in.
func (a *Application) Config() Config { return a.cfg }

// PingRedis checks that Redis answers (in a cluster, at least one master),
// with an error that says what to fix.
func (a *Application) PingRedis(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := pingAny(ctx, a.Redis); err != nil {
		return fmt.Errorf("%w: cannot reach Redis at %s: %w (check --redis-url / INVLEDGER_REDIS_URL, --redis-cluster or --redis-sentinels, or run `invledger dev`)",
			domain.ErrUnavailable, a.cfg.RedisTarget(), err)
	}
	return nil
}

// pingAny pings Redis; in a cluster, it succeeds when any master answers,
// since a master that is down stops only the SKUs whose partitions it holds.
func pingAny(ctx context.Context, client redis.UniversalClient) error {
	cluster, ok := client.(*redis.ClusterClient)
	if !ok {
		return client.Ping(ctx).Err()
	}
	var (
		mu      sync.Mutex
		answers int
		errs    []error
	)
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		err := node.Ping(ctx).Err()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", node.Options().Addr, err))
		} else {
			answers++
		}
		return nil
	})
	if answers > 0 {
		return nil
	}
	return errors.Join(append(errs, err)...)
}

// PingPostgres checks that PostgreSQL answers, with an error that says what
// to fix.
func (a *Application) PingPostgres(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := a.Pool.Ping(ctx); err != nil {
		cc := a.Pool.Config().ConnConfig
		return fmt.Errorf("%w: cannot reach PostgreSQL at %s:%d: %w (check --database-url / INVLEDGER_DATABASE_URL)",
			domain.ErrUnavailable, cc.Host, cc.Port, err)
	}
	return nil
}

// CheckSchema refuses a database that is not migrated, naming the command
// that fixes it. It reads the version without taking the migration lock.
func (a *Application) CheckSchema(ctx context.Context) error {
	db := stdlib.OpenDBFromPool(a.Pool)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	applied, embedded, err := migrations.Version(ctx, db)
	if err != nil {
		return err
	}
	if applied < embedded {
		return fmt.Errorf("database schema is at version %d, this binary needs %d: run `invledger migrate`", applied, embedded)
	}
	return nil
}

// Close stops the reconciler's background record repairs, then releases
// the PostgreSQL pool and the Redis client they use.
func (a *Application) Close() {
	if a.Reconciler != nil {
		a.Reconciler.Close()
	}
	if a.Pool != nil {
		a.Pool.Close()
	}
	if a.Redis != nil {
		_ = a.Redis.Close()
	}
}

// Migrate applies the embedded migrations to the database at databaseURL.
// It takes goose's lock, so concurrent callers apply each migration once.
func Migrate(ctx context.Context, databaseURL string, log *slog.Logger) error {
	poolCfg, err := pgxpool.ParseConfig(databaseURL)
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
