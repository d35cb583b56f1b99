package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections"
)

// ServeConfig holds serve's own settings.
type ServeConfig struct {
	Listen             string
	Tokens             string
	TokensFile         string
	Durability         string
	Components         []string
	AllowVolatileRedis bool
	Subscribers        int
	BatchSize          int
	BatchWait          time.Duration
	StreamRetention    time.Duration
	ConsumerName       string
	ReconcileInterval  time.Duration
	AlertWebhook       string
	ArchiveAfter       time.Duration
}

var knownComponents = []string{"api", "projector", "reconciler"}

const (
	defaultBatchWait         = 0
	defaultRetention         = time.Hour
	defaultReconcileInterval = time.Minute
)

// Validate reports every invalid setting at once.
func (c ServeConfig) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen (INVLEDGER_LISTEN) %q: %w", c.Listen, err))
	}
	if c.Durability != "strict" && c.Durability != "everysec" {
		errs = append(errs, fmt.Errorf("--durability (INVLEDGER_DURABILITY) must be strict or everysec, got %q", c.Durability))
	}
	if len(c.Components) == 0 {
		errs = append(errs, errors.New("--components must name at least one of "+strings.Join(knownComponents, ",")))
	}
	for _, comp := range c.Components {
		if !slices.Contains(knownComponents, comp) {
			errs = append(errs, fmt.Errorf("--components: unknown component %q (known: %s)", comp, strings.Join(knownComponents, ",")))
		}
	}
	if c.Subscribers < 1 {
		errs = append(errs, errors.New("--projector-subscribers must be at least 1"))
	}
	if c.BatchSize < 1 {
		errs = append(errs, errors.New("--batch-size must be at least 1"))
	}
	if c.BatchWait < 0 {
		errs = append(errs, errors.New("--batch-wait must not be negative"))
	}
	if c.ReconcileInterval <= 0 {
		errs = append(errs, errors.New("--reconcile-interval (INVLEDGER_RECONCILE_INTERVAL) must be positive"))
	}
	if c.ArchiveAfter < 0 {
		errs = append(errs, errors.New("--archive-after (INVLEDGER_ARCHIVE_AFTER) must not be negative"))
	}
	if c.AlertWebhook != "" {
		if u, err := url.Parse(c.AlertWebhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--alert-webhook (INVLEDGER_ALERT_WEBHOOK) %q is not an http(s) URL", c.AlertWebhook))
		}
	}
	return errors.Join(errs...)
}

func (c ServeConfig) has(component string) bool { return slices.Contains(c.Components, component) }

func newServeCmd(config func() (Config, error)) *cobra.Command {
	var sc ServeConfig
	cmd := &cobra.Command{
		Use:   "serve [--components api,projector,reconciler]",
		Short: "Run the HTTP API, the projector and the reconciler",
		Long: `serve runs the purchase API, the projector that writes the partition streams
into the ledger, and the reconciler, which compares Redis with the ledger every
--reconcile-interval, repairs drift, and verifies every SKU at once when Redis
restarts or fails over. --components runs a subset, so several projector
processes can run beside the API. SIGINT or SIGTERM stops it gracefully:
in-flight requests finish, and the projector commits or leaves its batch
pending for redelivery.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config()
			if err != nil {
				return err
			}
			if err := sc.Validate(); err != nil {
				return err
			}
			return serve(cmd.Context(), c, sc, nil)
		},
	}
	env := &envFlags{fs: cmd.Flags()}
	env.String(&sc.Listen, "listen", "INVLEDGER_LISTEN", "127.0.0.1:8080", "HTTP listen address")
	env.String(&sc.Tokens, "tokens", "INVLEDGER_TOKENS", "", "API tokens, name:role:secret comma-separated; roles gateway, operator, approver, auditor")
	env.String(&sc.TokensFile, "tokens-file", "INVLEDGER_TOKENS_FILE", "", "file with API tokens, one name:role:secret per line")
	env.String(&sc.Durability, "durability", "INVLEDGER_DURABILITY", "strict", "strict (Redis appendfsync always) or everysec")
	env.StringSlice(&sc.Components, "components", "INVLEDGER_COMPONENTS", "components to run (default api,projector)")
	env.Int(&sc.Subscribers, "projector-subscribers", "INVLEDGER_PROJECTOR_SUBSCRIBERS", 4, "projector consumers per partition stream")
	env.Int(&sc.BatchSize, "batch-size", "INVLEDGER_BATCH_SIZE", 500, "most events per ledger transaction")
	env.Duration(&sc.BatchWait, "batch-wait", "INVLEDGER_BATCH_WAIT", defaultBatchWait, "longest wait to fill a ledger transaction")
	env.Duration(&sc.StreamRetention, "stream-retention", "INVLEDGER_STREAM_RETENTION", defaultRetention, "keep acked stream entries this long")
	env.String(&sc.ConsumerName, "consumer-name", "INVLEDGER_CONSUMER_NAME", "", "stable projector consumer name prefix (default: host name)")
	env.Duration(&sc.ReconcileInterval, "reconcile-interval", "INVLEDGER_RECONCILE_INTERVAL", defaultReconcileInterval, "time between reconciliations with repair")
	env.String(&sc.AlertWebhook, "alert-webhook", "INVLEDGER_ALERT_WEBHOOK", "", "URL that receives a JSON POST per reconciliation finding")
	env.Duration(&sc.ArchiveAfter, "archive-after", "INVLEDGER_ARCHIVE_AFTER", 24*time.Hour, "archive the buyers of SKUs closed this long ago (0 disables)")
	cmd.Flags().BoolVar(&sc.AllowVolatileRedis, "allow-volatile-redis", false, "run even though Redis persistence is off (acknowledged sales can be lost)")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if len(sc.Components) == 0 {
			sc.Components = knownComponents
		}
		return env.Err()
	}
	return cmd
}

// serve runs the configured components until ctx ends. If ready is not nil it
// receives the API's address once it listens.
func serve(ctx context.Context, c Config, sc ServeConfig, ready chan<- string) error {
	a, err := openApp(ctx, c)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.checkSchema(ctx); err != nil {
		return err
	}
	if err := checkDurability(ctx, a.redis, sc.Durability, sc.AllowVolatileRedis, a.log); err != nil {
		return err
	}
	if err := a.inventory.Load(ctx); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector())
	metrics := projections.NewMetrics(reg)
	var inventory ledger.Inventory = a.inventory
	if sc.Durability == "everysec" {
		// Only everysec can lose acknowledged deductions; remember them so
		// verification after a restart can name what was lost.
		a.journal = ledger.NewReceiptJournal(journalWindow)
		inventory = a.journal.Wrap(inventory)
	}
	a.service = ledger.NewService(ledger.NewInventoryMetrics(reg).Wrap(inventory), a.skus, a.ledger)
	// Findings, dead letters and fenced SKUs all alert through one notifier.
	reconcileMetrics := reconcile.NewMetrics(reg)
	notifier, err := reconcile.NewNotifier(reconcile.NotifierConfig{WebhookURL: sc.AlertWebhook, Logger: a.log, Metrics: reconcileMetrics})
	if err != nil {
		return err
	}
	// The API triggers reconciliations too, so it needs a reconciler even in
	// a process that does not run the periodic loop.
	rec, err := a.reconciler(reconcileMetrics, notifier)
	if err != nil {
		return err
	}
	archiver, err := a.archiver()
	if err != nil {
		return err
	}
	a.registerPendingAdjustments(reg)

	// Everything that can fail is built; only then do components start, so
	// an early return never leaves one running.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	run := func(name string, f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				cancel() // one component failing stops the others
			}
		})
	}

	if sc.has("projector") {
		streams := a.keys.StreamKeys()
		p, err := projections.NewProjector(projections.ProjectorConfig{
			NewRedisClient: func(poolSize int) redis.UniversalClient {
				client, _ := newRedisClient(c, poolSize, nil) // the URL was validated by openApp
				return client
			},
			Streams:                 streams,
			ConsumerName:            sc.ConsumerName,
			SubscribersPerPartition: sc.Subscribers,
			Batch:                   projections.GroupCommitConfig{MaxBatch: sc.BatchSize, MaxWait: sc.BatchWait},
			Epoch:                   a.inventory.Epoch,
			EntryExists:             a.inventory.EntryExists,
			OnDeadLetter:            notifier.DeadLetter,
			Logger:                  a.log,
			Metrics:                 metrics,
		}, a.ledger, a.ledger)
		if err != nil {
			return err
		}
		j, err := projections.NewJanitor(projections.JanitorConfig{Client: a.redis, Streams: streams,
			Retention: sc.StreamRetention, Logger: a.log, Metrics: metrics})
		if err != nil {
			return err
		}
		run("projector", p.Run)
		run("janitor", func(ctx context.Context) error { j.Run(ctx); return nil })
		a.log.Info("projector started", "streams", len(streams), "subscribers_per_stream", sc.Subscribers)
	}
	run("alerts", func(ctx context.Context) error { notifier.Run(ctx); return nil })
	if sc.has("reconciler") {
		run("reconciler", func(ctx context.Context) error {
			return rec.RunLoop(ctx, reconcile.LoopConfig{Interval: sc.ReconcileInterval, Epoch: a.inventory.Epoch,
				Changed: a.inventory.RunIDs().Changed()})
		})
		if sc.ArchiveAfter > 0 {
			run("archiver", func(ctx context.Context) error {
				archiveClosedLoop(ctx, archiver, sc.ArchiveAfter, sc.ReconcileInterval, a.log)
				return nil
			})
		}
		a.log.Info("reconciler started", "interval", sc.ReconcileInterval, "alert_webhook", sc.AlertWebhook != "")
	}
	if sc.has("api") {
		srv, ln, err := newAPIServer(a, sc, httpapi.Config{
			Ledger:      a.service,
			Closer:      archiver,
			Auditor:     a.auditor(),
			Reconciler:  rec,
			Runs:        a.ledger,
			Adjustments: a.adjustments(rec),
			Metrics:     promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		})
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		a.log.Info("api listening", "url", "http://"+ln.Addr().String())
		if ready != nil {
			ready <- ln.Addr().String()
		}
		run("api", func(ctx context.Context) error { return serveHTTP(ctx, srv, ln) })
	}
	wg.Wait()
	a.log.Info("stopped")
	return errors.Join(errs...)
}

// newAPIServer serves the API over the services of cfg, adding the
// tokens, readiness probe and logger of a and sc.
func newAPIServer(a *app, sc ServeConfig, cfg httpapi.Config) (*http.Server, net.Listener, error) {
	tokens, err := loadTokens(sc)
	if err != nil {
		return nil, nil, err
	}
	cfg.Tokens = tokens
	cfg.Logger = a.log
	cfg.Ready = func(ctx context.Context) error {
		if err := a.redis.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		if err := a.pool.Ping(ctx); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		return nil
	}
	handler, err := httpapi.NewHandler(cfg)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", sc.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w (is another server using it? change --listen)", sc.Listen, err)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	return srv, ln, nil
}

// archiveClosedLoop archives the buyers of SKUs closed longer than
// olderThan, checking every interval: the seed's pitfall 3, the buyers set
// that grows without bound.
func archiveClosedLoop(ctx context.Context, archiver *ledger.Archiver, olderThan, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done, err := archiver.ArchiveClosed(ctx, olderThan)
		for _, r := range done {
			log.Info("archived buyers of closed sku", "sku", r.SKU)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("archiving closed skus", "err", err)
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

func loadTokens(sc ServeConfig) ([]httpapi.Token, error) {
	raw := sc.Tokens
	source := "--tokens (INVLEDGER_TOKENS)"
	if sc.TokensFile != "" {
		b, err := os.ReadFile(sc.TokensFile)
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

// checkDurability refuses a Redis whose persistence cannot keep the promises
// of the chosen mode: strict needs every write fsynced before it is answered.
func checkDurability(ctx context.Context, client redis.UniversalClient, mode string, allowVolatile bool, log *slog.Logger) error {
	cfg, err := client.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return fmt.Errorf("read Redis persistence settings (CONFIG GET): %w", err)
	}
	appendOnly, fsync := cfg["appendonly"], cfg["appendfsync"]
	switch {
	case appendOnly != "yes":
		if !allowVolatile {
			return errors.New("redis persistence is off (appendonly no): a restart would lose acknowledged sales. " +
				"Set `appendonly yes` and `appendfsync always` in redis.conf, or pass --allow-volatile-redis to accept the risk")
		}
		log.Warn("running with Redis persistence off: a Redis restart loses acknowledged sales until restore-redis")
	case mode == "strict" && fsync != "always":
		return fmt.Errorf("durability strict needs Redis `appendfsync always`, but it is %q: run CONFIG SET appendfsync always, or use --durability everysec", fsync)
	case mode == "everysec" && fsync != "always" && fsync != "everysec":
		return fmt.Errorf("durability everysec needs Redis appendfsync everysec or always, but it is %q", fsync)
	}
	return nil
}
