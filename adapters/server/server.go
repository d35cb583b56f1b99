package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/console"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/internal/webhooks/eventwebhook"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/observe/tracing"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections"
)

// Components a process can run.
const (
	ComponentAPI        = "api"
	ComponentProjector  = "projector"
	ComponentReconciler = "reconciler"
	// ComponentExport is the broker export, which runs where a broker URL
	// is set (Config.Export).
	ComponentExport = "export"
)

// Components lists every component, the default of Config.Components.
func Components() []string {
	return []string{ComponentAPI, ComponentProjector, ComponentReconciler, ComponentExport}
}

// Config is what Serve runs and how.
type Config struct {
	// Components to run; default all of Components().
	Components []string
	// Listen is the API's address, or, in a process without the API, the
	// address of its /metrics, /healthz and /readyz. Default 127.0.0.1:8080.
	Listen string
	// MaxConns caps the API's open connections. When full, an idle
	// keep-alive connection, or one whose request headers are not yet
	// complete, is closed to make room, taken from the client address
	// holding the most connections; when every one is busy, one more is
	// answered 503 with Retry-After and closed at once (but /healthz and
	// /readyz are answered). While full, a request still being read, its
	// headers or its body, has a second to arrive. Default 1024.
	MaxConns int
	// MaxConnsPerClient, when set, caps the open connections from one TCP
	// peer address, below MaxConns. 0, the default, is no cap: a client
	// whose connections are busy is served up to MaxConns, as a gateway
	// or a proxy, behind which every client is the proxy, must be.
	MaxConnsPerClient int
	// BodyTimeout bounds the wait for a request's body once its headers
	// are read: a body not in by then is answered 408 and its connection
	// closed, so a slowly sent body holds a connection this long at most.
	// Default 2s.
	BodyTimeout time.Duration
	// Tokens and TokensFile hold name:role:secret entries; the API needs
	// one. TokensFile is read again on SIGHUP; a bad file is refused and
	// the tokens in use are kept.
	Tokens     string
	TokensFile string
	// AllowVolatileRedis runs although Redis persistence is off.
	AllowVolatileRedis bool
	// RedisConfig is RedisConfigCheck (default: read every master's
	// persistence settings with CONFIG GET) or RedisConfigAssume (skip the
	// read, for a managed Redis with CONFIG disabled; the log, /readyz and
	// invledger_redis_config_assumed say so).
	RedisConfig string
	// Subscribers is the projector's consumers per partition stream. Each
	// reads in batches and holds one Redis connection per stream. Default 1.
	Subscribers int
	// CommitSize bounds the events of one ledger transaction. Default 500.
	CommitSize int
	// CommitWait is the extra wait to fill a transaction; 0 commits at once.
	CommitWait time.Duration
	// ReclaimAfter is how long an entry stays pending on a consumer before
	// the projector takes it over, e.g. one delivered just before its
	// Redis master failed over. Default: projections.ProjectorConfig's.
	ReclaimAfter time.Duration
	// StreamRetention keeps acked stream entries this long. Default 1h.
	StreamRetention time.Duration
	// ConsumerName prefixes the projector's consumer names. Default:
	// "<host name>-<instance id>", the id kept under DataDir (see
	// projections.ClaimConsumerName), so a restart takes back its own pending
	// entries and two processes never share a name.
	ConsumerName string
	// DataDir keeps this process instance's state: the projector's
	// instance id, locked while it runs. Default DefaultDataDir().
	DataDir string
	// ReconcileInterval is the time between reconciliations with repair. Default 60s.
	ReconcileInterval time.Duration
	// ArchiveAfter archives the buyers of SKUs closed this long ago; 0
	// disables it. Serve does not default it: 24h is the CLI's default.
	ArchiveAfter time.Duration
	// RetireAfter retires SKUs closed, or restored from retirement, this
	// long ago, archiving their buyers first; 0 disables it. It should
	// cover the window in which gateways retry. Serve does not default it:
	// 24h is the CLI's default.
	RetireAfter time.Duration
	// RedisCheckInterval is how often the API re-reads Redis's persistence
	// and eviction settings while serving; unsafe ones stop sales with
	// 503 unsafe_redis until they are fixed. Default 1s.
	RedisCheckInterval time.Duration
	// SweepInterval is how often the API's hold expiry expires the holds whose
	// deadline passed. Default ledger.DefaultExpiryInterval.
	SweepInterval time.Duration
	// IdempotencyWindow is how long the answer to a write sent with an
	// Idempotency-Key is kept for its retries. Default
	// DefaultIdempotencyWindow.
	IdempotencyWindow time.Duration
	// ConsoleKey signs and encrypts the console's session cookies; every
	// process behind one balancer needs the same, at least
	// console.MinKeyLen bytes. Empty: a random key, logged as such, whose
	// sessions end with the process and work on it alone.
	ConsoleKey string
	// ConsoleSecureCookie marks the console's cookie Secure although this
	// process sees plain HTTP, as behind a proxy that ends TLS.
	ConsoleSecureCookie bool
	// ConsoleIdleTimeout signs a console user out after this long without
	// opening a page. Default 15m.
	ConsoleIdleTimeout time.Duration
	// WebhookMinBackoff and WebhookMaxBackoff bound the wait between
	// attempts to deliver a business-event webhook. Defaults: those of
	// eventwebhook.Config.
	WebhookMinBackoff, WebhookMaxBackoff time.Duration
	// Export configures the broker export (ComponentExport).
	Export ExportConfig
	// exportNotes, set by Serve, reports the export in /readyz.
	exportNotes func() []httpapi.ReadinessNote
	// OnListening, if set, is told the API's address once it accepts connections.
	OnListening func(addr string)
}

func (c *Config) setDefaults() {
	if len(c.Components) == 0 {
		c.Components = Components()
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.Subscribers == 0 {
		c.Subscribers = 1
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if c.CommitSize == 0 {
		c.CommitSize = 500
	}
	if c.StreamRetention == 0 {
		c.StreamRetention = time.Hour
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = time.Minute
	}
	if c.RedisCheckInterval == 0 {
		c.RedisCheckInterval = time.Second
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = ledger.DefaultExpiryInterval
	}
	if c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if c.RedisConfig == "" {
		c.RedisConfig = RedisConfigCheck
	}
}

// Validate reports every invalid setting at once, naming flag and variable.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen (INVLEDGER_LISTEN) %q: %w", c.Listen, err))
	}
	for _, comp := range c.Components {
		if !slices.Contains(Components(), comp) {
			errs = append(errs, fmt.Errorf("--components: unknown component %q (known: %s)", comp, strings.Join(Components(), ",")))
		}
	}
	if c.MaxConns < 1 {
		errs = append(errs, errors.New("--max-conns (INVLEDGER_MAX_CONNS) must be at least 1"))
	}
	if c.MaxConnsPerClient < 0 || c.MaxConnsPerClient > c.MaxConns {
		errs = append(errs, fmt.Errorf("--max-conns-per-client (INVLEDGER_MAX_CONNS_PER_CLIENT) must be 0 (no cap) or 1 to --max-conns (%d), got %d", c.MaxConns, c.MaxConnsPerClient))
	}
	if c.BodyTimeout < 0 {
		errs = append(errs, errors.New("body timeout must not be negative"))
	}
	if c.Subscribers < 1 {
		errs = append(errs, errors.New("--projector-subscribers must be at least 1"))
	}
	if c.CommitSize < 1 {
		errs = append(errs, errors.New("--batch-size must be at least 1"))
	}
	if c.CommitWait < 0 {
		errs = append(errs, errors.New("--batch-wait must not be negative"))
	}
	if c.StreamRetention < 0 {
		errs = append(errs, errors.New("--stream-retention (INVLEDGER_STREAM_RETENTION) must not be negative"))
	}
	if c.ReconcileInterval < 0 {
		errs = append(errs, errors.New("--reconcile-interval (INVLEDGER_RECONCILE_INTERVAL) must be positive"))
	}
	if c.RedisCheckInterval < 0 {
		errs = append(errs, errors.New("redis check interval must not be negative"))
	}
	if c.SweepInterval < 0 {
		errs = append(errs, errors.New("sweep interval must not be negative"))
	}
	if c.RedisConfig != RedisConfigCheck && c.RedisConfig != RedisConfigAssume {
		errs = append(errs, fmt.Errorf("--redis-config (INVLEDGER_REDIS_CONFIG) must be check or assume, got %q", c.RedisConfig))
	}
	if c.ArchiveAfter < 0 {
		errs = append(errs, errors.New("--archive-after (INVLEDGER_ARCHIVE_AFTER) must not be negative"))
	}
	if c.IdempotencyWindow < 0 {
		errs = append(errs, errors.New("idempotency window must not be negative"))
	}
	if c.RetireAfter < 0 {
		errs = append(errs, errors.New("--retire-after (INVLEDGER_RETIRE_AFTER) must not be negative"))
	}
	if c.ConsoleKey != "" && len(c.ConsoleKey) < console.MinKeyLen {
		errs = append(errs, fmt.Errorf("--console-key (INVLEDGER_CONSOLE_KEY) is %d bytes; at least %d are required", len(c.ConsoleKey), console.MinKeyLen))
	}
	if c.has(ComponentExport) && len(c.Components) == 1 && !c.Export.Enabled() {
		errs = append(errs, errors.New("--components export exports nothing: set --export-nats-url (INVLEDGER_EXPORT_NATS_URL) or --export-amqp-url (INVLEDGER_EXPORT_AMQP_URL)"))
	}
	errs = append(errs, c.Export.Validate())
	if c.ConsoleIdleTimeout != 0 && c.ConsoleIdleTimeout < time.Second {
		errs = append(errs, errors.New("--console-idle-timeout (INVLEDGER_CONSOLE_IDLE_TIMEOUT) must be at least 1s"))
	}
	return errors.Join(errs...)
}

func (c Config) has(component string) bool { return slices.Contains(c.Components, component) }

// Check reports every invalid setting of sc, the API's tokens included,
// without connecting to anything, so a command can refuse a bad
// configuration before it opens the application. Serve checks the same.
func Check(sc Config) error {
	_, _, err := prepare(sc)
	return err
}

// prepare applies sc's defaults, validates it and loads the API's tokens.
func prepare(sc Config) (Config, []httpapi.Token, error) {
	sc.setDefaults()
	if err := sc.Validate(); err != nil {
		return sc, nil, err
	}
	if !sc.has(ComponentAPI) {
		return sc, nil, nil
	}
	tokens, err := loadTokens(sc.Tokens, sc.TokensFile)
	return sc, tokens, err
}

// Serve runs sc's components over a until ctx ends, then stops them
// gracefully: in-flight requests finish, and the projector commits or
// leaves its batch pending for redelivery. Every component is built, and
// every setting checked, before any starts, so an early error leaves
// nothing running. One component failing stops the others.
func Serve(ctx context.Context, a *app.Application, sc Config) error {
	sc, tokens, err := prepare(sc)
	if err != nil {
		return err
	}
	if err := a.CheckSchema(ctx); err != nil {
		return err
	}
	if err := a.PingRedis(ctx); err != nil {
		return err
	}
	policy := safetyPolicy{mode: a.Config().Durability, allowVolatile: sc.AllowVolatileRedis, assume: sc.RedisConfig == RedisConfigAssume}
	if policy.assume {
		a.Metrics.RedisConfigAssumed.Set(1)
	}
	if err := checkDurability(ctx, a.Redis, policy, a.Log); err != nil {
		return err
	}
	if skipped, err := approot.Of(a).Adapters.Inventory.Load(ctx); err != nil {
		return err
	} else if len(skipped) > 0 {
		a.Log.Warn("redis scripts not preloaded on unreachable masters; they are sent on first use", "masters", skipped)
	}

	tp, err := tracing.Setup(ctx, os.Getenv)
	if err != nil {
		return err
	}
	if tp != nil {
		a.Log.Info("tracing on: spans are exported over OTLP (OTEL_* variables)")
		defer func() {
			flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := tp.Shutdown(flush); err != nil {
				a.Log.Warn("tracing: last spans not exported", "err", err)
			}
		}()
	}

	var components []component
	if sc.has(ComponentProjector) {
		// The sealer runs with the projector: without a key it would stop
		// at every pass of a keyed ledger, so serve refuses to start.
		if err := a.Sealer.Check(ctx); err != nil {
			return err
		}
		c, release, err := projectorComponents(a, sc)
		if err != nil {
			return err
		}
		defer release()
		components = append(components, c...)
	}
	if sc.has(ComponentExport) && sc.Export.Enabled() {
		exps, err := exporters(a, sc.Export)
		if err != nil {
			return err
		}
		c, leading := exportComponent(a, exps)
		components = append(components, c)
		a.Log.Info("broker export started", "nats", app.RedactURL(sc.Export.NATSURL), "amqp", app.RedactURL(sc.Export.AMQPURL))
		sc.exportNotes = func() []httpapi.ReadinessNote { return exportNotes(exps, leading) }
	}
	if approot.Of(a).Webhook != nil {
		components = append(components, component{"alerts", func(ctx context.Context) error { approot.Of(a).Webhook.Run(ctx); return nil }})
	}
	if sc.has(ComponentReconciler) {
		// One process of the deployment reconciles periodically, so a drift
		// is repaired and alerted once; the others stand by to take over.
		components = append(components, component{"reconciler", func(ctx context.Context) error {
			return ledger.RunAsLeader(ctx, ledger.LeaderConfig{Name: "reconciler", Lock: approot.Of(a).Adapters.ReconcilerLeader,
				Poll: leaderPoll(sc.ReconcileInterval), OnLeading: a.Metrics.Reconcile.SetLeader, Logger: a.Log},
				func(ctx context.Context) error {
					return a.Reconciler.RunLoop(ctx, reconcile.LoopConfig{Interval: sc.ReconcileInterval, NodeRuns: approot.Of(a).Adapters.NodeRuns.NodeRuns,
						Changed: approot.Of(a).NodeRunWatch.Changed()})
				})
		}})
		if sc.ArchiveAfter > 0 || sc.RetireAfter > 0 {
			components = append(components, component{"archiver", func(ctx context.Context) error {
				archiveClosedLoop(ctx, a.Archiver, sc.ArchiveAfter, sc.RetireAfter, sc.ReconcileInterval, a.Log)
				return nil
			}})
		}
		a.Log.Info("reconciler started", "interval", sc.ReconcileInterval, "alert_webhook", a.Config().AlertWebhook != "")
	}
	if sc.has(ComponentAPI) {
		set, err := httpapi.NewTokenSet(tokens)
		if err != nil {
			return err
		}
		if sc.TokensFile != "" {
			// Notify before the API listens, so a SIGHUP sent once it
			// answers never meets the default action, which would end the process.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			r := tokenReloader{set: set, inline: sc.Tokens, file: sc.TokensFile, log: a.Log}
			components = append(components, component{"tokens-reload", func(ctx context.Context) error {
				r.run(ctx, hup)
				return nil
			}})
		}
		c, err := apiComponent(a, sc, set)
		if err != nil {
			return err
		}
		flusher, err := refusalFlusher(a)
		if err != nil {
			return err
		}
		components = append(components, c, flusher, component{"redis-safety", safetyWatcher{client: a.Redis,
			policy: policy, sales: approot.Of(a).Adapters.Inventory,
			alerts: a.Alerts, interval: sc.RedisCheckInterval, log: a.Log}.run},
			// Every API process expires holds: expiry needs no leader, so
			// holds expire while any API runs, and no PostgreSQL.
			component{"hold-expiry", func(ctx context.Context) error { return a.HoldExpiry.Run(ctx, sc.SweepInterval) }})
	} else {
		c, err := opsComponent(a, sc)
		if err != nil {
			return err
		}
		components = append(components, c)
	}
	err = runAll(ctx, components)
	a.Log.Info("stopped")
	return err
}

// component is one long-running part of a process.
type component struct {
	name string
	run  func(context.Context) error
}

// runAll runs every component until ctx ends or one fails, which stops the
// others, and returns every failure.
func runAll(ctx context.Context, components []component) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range components {
		wg.Go(func() {
			if err := c.run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// projectorComponents builds the projector and the stream janitor, and
// claims the projector's consumer name until release is called. The
// projector's reads get a client of their own, so blocked reads never take
// connections the purchase scripts need.
func projectorComponents(a *app.Application, sc Config) (_ []component, release func(), err error) {
	name, release, err := projections.ClaimConsumerName(sc.ConsumerName, sc.DataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("projector consumer name (--consumer-name, --data-dir): %w", err)
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	streams := approot.Of(a).Keys.StreamKeys()
	cfg := a.Config()
	p, err := projections.NewProjector(projections.ProjectorConfig{
		NewRedisClient: func(poolSize int) redis.UniversalClient {
			client, _ := app.NewRedisClient(cfg, poolSize) // New validated the URL
			return client
		},
		Streams:                 streams,
		ConsumerName:            name,
		SubscribersPerPartition: sc.Subscribers,
		ReclaimAfter:            sc.ReclaimAfter,
		Commit:                  projections.GroupCommitConfig{MaxEvents: sc.CommitSize, MaxWait: sc.CommitWait},
		NodeRuns:                approot.Of(a).Adapters.NodeRuns.NodeRuns,
		EntryExists:             approot.Of(a).Adapters.NodeRuns.EntryExists,
		OnDeadLetter:            a.Alerts.DeadLetter,
		Logger:                  a.Log,
		Metrics:                 a.Metrics.Projection,
	}, approot.Of(a).Adapters.Projection, approot.Of(a).Adapters.Projection)
	if err != nil {
		return nil, nil, err
	}
	j, err := projections.NewJanitor(projections.JanitorConfig{Client: a.Redis, Streams: streams,
		Retention: sc.StreamRetention, Logger: a.Log, Metrics: a.Metrics.Projection})
	if err != nil {
		return nil, nil, err
	}
	d, err := eventwebhook.New(eventwebhook.Config{Store: approot.Of(a).Adapters.Webhooks, Client: approot.Of(a).Egress.Client(), MinBackoff: sc.WebhookMinBackoff,
		MaxBackoff: sc.WebhookMaxBackoff, Metrics: approot.Of(a).EventWebhookMetrics, Logger: a.Log})
	if err != nil {
		return nil, nil, err
	}
	a.Log.Info("projector started", "streams", len(streams), "subscribers_per_stream", sc.Subscribers, "consumer", name)
	return []component{
		{"projector", p.Run},
		// One janitor trims every stream, so one --stream-retention applies.
		{"janitor", func(ctx context.Context) error {
			return ledger.RunAsLeader(ctx, ledger.LeaderConfig{Name: "janitor", Lock: approot.Of(a).Adapters.JanitorLeader,
				Poll: leaderPoll(sc.StreamRetention), Logger: a.Log},
				func(ctx context.Context) error { j.Run(ctx); return nil })
		}},
		{"sealer", a.Sealer.Run},
		// One process delivers the business-event webhooks, from the
		// ledger the projector writes; a standby takes over within a poll.
		{"webhooks", func(ctx context.Context) error {
			return ledger.RunAsLeader(ctx, ledger.LeaderConfig{Name: "event webhooks", Lock: approot.Of(a).Adapters.WebhookLeader,
				Poll: time.Second, Logger: a.Log}, d.Run)
		}},
	}, release, nil
}

// leaderPoll is how often a standby tries to take a role over, and its
// leader checks its lease: within a second, and never slower than the
// role's own period, so a dead leader's role is taken over within one
// period.
func leaderPoll(period time.Duration) time.Duration {
	return min(time.Second, period)
}

// DefaultDataDir is Config.DataDir's default: $XDG_STATE_HOME/invledger,
// or ./.invledger-state when XDG_STATE_HOME is not set.
func DefaultDataDir() string {
	if state := os.Getenv("XDG_STATE_HOME"); state != "" {
		return filepath.Join(state, "invledger")
	}
	return ".invledger-state"
}

// apiHandler is the HTTP API over a's services, for a process configured by
// sc (its components, its --redis-config): every route, one table,
// authenticating against tokens.
func apiHandler(a *app.Application, sc Config, tokens *httpapi.TokenSet) (http.Handler, error) {
	return httpapi.NewHandler(httpapi.Config{
		TokenSet:    tokens,
		Ledger:      a.Service,
		Holds:       a.Holds,
		Orders:      a.Orders,
		SKUs:        a.Catalog,
		Closer:      a.Archiver,
		Auditor:     a.Auditor,
		Reconciler:  a.Reconciler,
		Runs:        approot.Of(a).Adapters.Reconciliations,
		Adjustments: a.Adjustments,
		DeadLetters: a.DeadLetters,
		Webhooks:    a.Webhooks,
		Idempotency: approot.Of(a).Adapters.Idempotency,
		Metrics:     promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{Registry: a.Metrics.Registry}),
		OnUnavailable: func(route string, code domain.Code) {
			a.Metrics.Unavailable.WithLabelValues(route, string(code)).Inc()
		},
		OnPurchase: approot.Of(a).Recovering.Observe,
		OnRequest:  newRequestMetrics(a.Metrics.HTTPRequests, a.Metrics.HTTPDuration).observe,
		Ready:      readiness(a, sc),
		Tracer:     requestTracer(),
		Logger:     a.Log,
	})
}

// requestTracer is the API's tracer when tracing is on, i.e. an SDK
// tracer provider is installed (tracing.Setup, or a test's
// tracing.Install), and nil otherwise, so that requests pay nothing for it.
func requestTracer() trace.Tracer {
	if _, on := otel.GetTracerProvider().(*sdktrace.TracerProvider); !on {
		return nil
	}
	return otel.Tracer("github.com/invledger/invledger/adapters/internal/httpapi")
}

// readiness is the probe behind /readyz. A process running the API is
// ready while Redis answers, since purchases need nothing else: a
// PostgreSQL outage only delays the ledger, and the probe says so in its
// body. Any other process (projector, reconciler) needs both. The
// reasons, with addresses, go to the log, never to the caller. The API's
// SKUs refusing as recovering past recovering.Bound are a note, never a
// failure: a failing probe takes the pod out of its Service, and with it
// the sales of every SKU that is fine.
func readiness(a *app.Application, sc Config) func(ctx context.Context) httpapi.Readiness {
	api := sc.has(ComponentAPI)
	needPostgres := !api
	return func(ctx context.Context) httpapi.Readiness {
		deps := []struct {
			name   string
			ping   func(context.Context) error
			needed bool
		}{
			{"redis", a.PingRedis, true},
			{"postgres", a.PingPostgres, needPostgres},
		}
		errs := make([]error, len(deps))
		var wg sync.WaitGroup
		for i, d := range deps {
			wg.Go(func() { errs[i] = d.ping(ctx) })
		}
		wg.Wait()
		rd := httpapi.Readiness{Ready: true}
		if sc.RedisConfig == RedisConfigAssume {
			rd.Notes = append(rd.Notes, httpapi.ReadinessNote{Name: "redis_config", Value: "assumed"})
		}
		if sc.exportNotes != nil {
			rd.Notes = append(rd.Notes, sc.exportNotes()...)
		}
		if api {
			rd.Notes = append(rd.Notes, httpapi.ReadinessNote{Name: "recovering", Value: approot.Of(a).Recovering.Note()})
		}
		for i, d := range deps {
			rd.Checks = append(rd.Checks, httpapi.DependencyCheck{Name: d.name, OK: errs[i] == nil})
			if errs[i] != nil {
				a.Log.WarnContext(ctx, "readiness: "+d.name+" unreachable", "needed", d.needed, "err", errs[i])
				rd.Ready = rd.Ready && !d.needed
			}
		}
		return rd
	}
}

// DefaultMaxConns is Config.MaxConns's default.
const DefaultMaxConns = 1024

// DefaultBodyTimeout is Config.BodyTimeout's default: a body is at most
// 64 KiB, which an honest client sends in milliseconds.
const DefaultBodyTimeout = 2 * time.Second

// DefaultIdempotencyWindow is Config.IdempotencyWindow's default: the
// window in which gateways retry, as Stripe keeps its keys.
const DefaultIdempotencyWindow = 24 * time.Hour

// idleTimeout closes idle keep-alive connections. It is short because the
// API sits behind a reverse proxy that keeps its own pool: a client that
// opens connections and leaves them idle holds them only this long.
const idleTimeout = 30 * time.Second

// apiComponent serves the API on --listen until ctx ends.
func apiComponent(a *app.Application, sc Config, tokens *httpapi.TokenSet) (component, error) {
	api, err := apiHandler(a, sc, tokens)
	if err != nil {
		return component{}, err
	}
	con, err := newConsole(a, sc, tokens, api)
	if err != nil {
		return component{}, err
	}
	// Not a ServeMux: its redirects of unclean paths (//, /./) would answer
	// before either handler, without X-Request-Id.
	withID := httpapi.WithRequestID(con)
	c, err := httpComponent(a, sc, "api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == console.Root || strings.HasPrefix(r.URL.Path, console.Prefix) {
			withID.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}))
	serve := c.run
	c.run = func(ctx context.Context) error {
		defer con.Close()
		go forgetIdempotencyKeys(ctx, approot.Of(a).Adapters.Idempotency, sc.IdempotencyWindow, a.Log)
		// Live feeds last until their watchers leave; shutdown ends them
		// so in-flight requests can finish in time.
		go func() { <-ctx.Done(); con.Close() }()
		return serve(ctx)
	}
	return c, err
}

// opsComponent serves /metrics, /healthz and /readyz on --listen for a
// process that runs no API, so every process can be scraped and probed.
func opsComponent(a *app.Application, sc Config) (component, error) {
	handler, err := httpapi.NewOpsHandler(promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{Registry: a.Metrics.Registry}),
		readiness(a, sc), 0, a.Log)
	if err != nil {
		return component{}, err
	}
	return httpComponent(a, sc, "ops", handler)
}

// httpComponent listens on sc.Listen at once, so a taken address fails
// Serve before any component starts, and serves handler until ctx ends.
func httpComponent(a *app.Application, sc Config, name string, handler http.Handler) (component, error) {
	ln, err := net.Listen("tcp", sc.Listen)
	if err != nil {
		return component{}, fmt.Errorf("listen on %s: %w (is another server using it? change --listen)", sc.Listen, err)
	}
	limited := newLimitListener(ln, sc.MaxConns, sc.MaxConnsPerClient, handler, a.Log)
	ln = limited
	srv := &http.Server{
		Handler:           guardBodies(handler, sc.BodyTimeout),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(a.Log.Handler(), slog.LevelWarn),
	}
	serveWithin(srv)
	addr := ln.Addr().String()
	a.Log.Info(name+" listening", "url", "http://"+addr)
	if sc.OnListening != nil {
		sc.OnListening(addr)
	}
	return component{name, func(ctx context.Context) error { return serveHTTP(ctx, srv, ln) }}, nil
}

// forgetIdempotencyKeys deletes, every few minutes, the Idempotency-Keys
// first used longer than window ago: a retry after that runs again. Every
// API process may run it; deleting twice is harmless.
func forgetIdempotencyKeys(ctx context.Context, store *pgstore.PostgresIdempotencyStore, window time.Duration, log *slog.Logger) {
	t := time.NewTicker(min(window, 10*time.Minute))
	defer t.Stop()
	for {
		n, err := store.DeleteBefore(ctx, time.Now().Add(-window))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("forgetting expired idempotency keys", "err", err)
		case n > 0:
			log.Debug("forgot expired idempotency keys", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// serveHTTP serves until ctx ends, then lets in-flight requests finish.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	return nil
}

// archiveClosedLoop archives the buyers of SKUs closed longer than
// archiveAfter, then retires those closed longer than retireAfter (0
// skips either), checking every interval, so finished sales do not grow
// Redis without bound.
func archiveClosedLoop(ctx context.Context, archiver *ledger.Archiver, archiveAfter, retireAfter, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if archiveAfter > 0 {
			done, err := archiver.ArchiveClosed(ctx, archiveAfter)
			for _, r := range done {
				log.Info("archived buyers of closed sku", "sku", r.SKU)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("archiving closed skus", "err", err)
			}
		}
		if retireAfter > 0 {
			done, err := archiver.RetireClosed(ctx, retireAfter)
			for _, r := range done {
				log.Info("retired closed sku from Redis", "sku", r.SKU, "seq", r.Seq)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("retiring closed skus", "err", err)
			}
		}
	}
}

// loadTokens parses the API tokens given inline and in a file.
func loadTokens(inline, file string) ([]httpapi.Token, error) {
	raw := inline
	source := "--tokens (INVLEDGER_TOKENS)"
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--tokens-file (INVLEDGER_TOKENS_FILE): %w", err)
		}
		if raw != "" {
			raw += ","
		}
		raw += string(b)
		source = "--tokens / --tokens-file"
	}
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("the API needs tokens: set INVLEDGER_TOKENS=name:role:secret,... or INVLEDGER_TOKENS_FILE (roles: gateway, operator, approver, auditor)")
	}
	tokens, err := httpapi.ParseTokens(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return tokens, nil
}
