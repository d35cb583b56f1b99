package cli

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/server"
)

// ServeSettings are serve's flags: what runs, and the settings only a serving process needs.
type ServeSettings struct {
	server.Config
	Durability                       string
	AlertWebhook, AlertWebhookSecret string
	WebhookAllowNets                 []string
}

func newServeCmd(config func() (Config, error)) *cobra.Command {
	var ss ServeSettings
	cmd := &cobra.Command{
		Use:   "serve [--components api,projector,reconciler,export]",
		Short: "Run the HTTP API, the projector and the reconciler",
		Long: `serve runs the purchase API, the projector that writes the partition streams
into the ledger, and the reconciler, which compares Redis with the ledger every
--reconcile-interval, repairs drift, and verifies every SKU at once when Redis
restarts or fails over. --components runs a subset, so several projector
processes can run beside the API, and the broker export (--export-nats-url,
--export-amqp-url) can run as a process of its own. SIGINT or SIGTERM stops it gracefully:
in-flight requests finish, and the projector commits or leaves its batch
pending for redelivery.

serve never migrates: it checks that the schema is current (run
invledger migrate first), so serves started together do not wait on each other.`,
		Example: `  invledger serve --tokens-file /etc/invledger/tokens
  invledger serve --components projector --consumer-name proj-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config()
			if err != nil {
				return err
			}
			return Serve(cmd.Context(), c, ss)
		},
	}
	env := &EnvFlags{fs: cmd.Flags()}
	env.String(&ss.Listen, "listen", "INVLEDGER_LISTEN", "127.0.0.1:8080", "HTTP listen address: the API, or /metrics, /healthz and /readyz in a process without the API")
	env.Int(&ss.MaxConns, "max-conns", "INVLEDGER_MAX_CONNS", server.DefaultMaxConns, "most open API connections; when full an idle one is closed to make room, and when all are busy one more gets 503 at once")
	env.Int(&ss.MaxConnsPerClient, "max-conns-per-client", "INVLEDGER_MAX_CONNS_PER_CLIENT", 0, "most open API connections from one client address (0: no cap, a busy client is served up to --max-conns); behind a proxy every client is the proxy")
	env.Secret(&ss.Tokens, "tokens", "INVLEDGER_TOKENS", "API tokens, name:role:secret comma-separated; roles gateway, operator, approver, auditor")
	env.String(&ss.TokensFile, "tokens-file", "INVLEDGER_TOKENS_FILE", "", "file with API tokens, one name:role:secret per line; read again on SIGHUP")
	env.String(&ss.Durability, "durability", "INVLEDGER_DURABILITY", app.DurabilityStrict, "strict (Redis appendfsync always) or everysec")
	env.StringSlice(&ss.Components, "components", "INVLEDGER_COMPONENTS", "components to run (default api,projector,reconciler,export; export runs when a broker URL is set)")
	env.Int(&ss.Subscribers, "projector-subscribers", "INVLEDGER_PROJECTOR_SUBSCRIBERS", 1, "projector consumers per partition stream, each reading in batches")
	env.IntRenamed(&ss.CommitSize, "commit-size", "INVLEDGER_COMMIT_SIZE", Renamed{"batch-size", "INVLEDGER_BATCH_SIZE"}, 500,
		"most events per ledger transaction of the projector (a commit), and the COUNT of each of its stream reads")
	env.DurationRenamed(&ss.CommitWait, "commit-wait", "INVLEDGER_COMMIT_WAIT", Renamed{"batch-wait", "INVLEDGER_BATCH_WAIT"}, 0,
		"longest wait to fill a ledger transaction of the projector")
	env.Duration(&ss.StreamRetention, "stream-retention", "INVLEDGER_STREAM_RETENTION", time.Hour, "keep acked stream entries this long")
	env.String(&ss.ConsumerName, "consumer-name", "INVLEDGER_CONSUMER_NAME", "", "stable projector consumer name prefix (default: <host>-<instance id kept in --data-dir>)")
	env.String(&ss.DataDir, "data-dir", "INVLEDGER_DATA_DIR", server.DefaultDataDir(), "this instance's state (the projector's instance id); one per live process")
	env.Duration(&ss.ReconcileInterval, "reconcile-interval", "INVLEDGER_RECONCILE_INTERVAL", time.Minute, "time between reconciliations with repair")
	env.Secret(&ss.AlertWebhook, "alert-webhook", "INVLEDGER_ALERT_WEBHOOK", "URL that receives a JSON POST per reconciliation finding")
	env.Secret(&ss.AlertWebhookSecret, "alert-webhook-secret", "INVLEDGER_ALERT_WEBHOOK_SECRET", "base64 key (whsec_...) that signs each alert the Standard Webhooks way")
	env.StringSlice(&ss.WebhookAllowNets, "webhook-allow-nets", "INVLEDGER_WEBHOOK_ALLOW_NETS",
		"internal networks (CIDRs, comma-separated) that webhooks may reach; all others are refused")
	env.Duration(&ss.ArchiveAfter, "archive-after", "INVLEDGER_ARCHIVE_AFTER", 24*time.Hour, "archive the buyers of SKUs closed this long ago (0 disables)")
	env.Duration(&ss.RetireAfter, "retire-after", "INVLEDGER_RETIRE_AFTER", 24*time.Hour, "retire SKUs closed (or restored) this long ago from Redis: the retry window of gateways (0 disables)")
	env.String(&ss.RedisConfig, "redis-config", "INVLEDGER_REDIS_CONFIG", server.RedisConfigCheck,
		"check: read every master's persistence settings (CONFIG GET); assume: skip the read (managed Redis with CONFIG disabled) and assert the persistence --durability names")
	env.Secret(&ss.ConsoleKey, "console-key", "INVLEDGER_CONSOLE_KEY", "key (32+ bytes) of the console's session cookies, the same on every serve behind one balancer (unset: a random one)")
	env.Duration(&ss.ConsoleIdleTimeout, "console-idle-timeout", "INVLEDGER_CONSOLE_IDLE_TIMEOUT", 15*time.Minute, "sign a console user out after this long without opening a page")
	exportFlags(env, &ss.Export)
	cmd.Flags().BoolVar(&ss.ConsoleSecureCookie, "console-secure-cookie", false, "mark the console's cookie Secure although serve sees plain HTTP (TLS ended at a proxy)")
	cmd.Flags().BoolVar(&ss.AllowVolatileRedis, "allow-volatile-redis", false, "run even though Redis persistence is off (acknowledged sales can be lost)")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		env.Warn(cmd.ErrOrStderr())
		return env.Err()
	}
	return cmd
}

// Serve opens the application over c with ss's durability and webhook, and
// runs ss's components until ctx ends. It checks every setting, the tokens
// included, before it connects to anything.
func Serve(ctx context.Context, c Config, ss ServeSettings) error {
	c.Durability = ss.Durability
	ac := c.AppConfig()
	ac.AlertWebhook, ac.AlertWebhookSecret, ac.WebhookAllowNets = ss.AlertWebhook, ss.AlertWebhookSecret, ss.WebhookAllowNets
	if err := errors.Join(ac.Validate(), server.Check(ss.Config)); err != nil {
		return err
	}
	a, err := app.New(ctx, ac)
	if err != nil {
		return err
	}
	defer a.Close()
	return server.Serve(ctx, a, ss.Config)
}
