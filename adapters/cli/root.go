package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/cliflags"
	"github.com/invledger/invledger/adapters/cli/internal/holdcmd"
	"github.com/invledger/invledger/adapters/cli/internal/ordercmd"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// CommandFunc builds a command over the settings every command shares;
// config returns them validated.
type CommandFunc func(config func() (Config, error)) *cobra.Command

// NewRootCmd is the invledger command with every command of the shipped
// binary, and extra's commands in place of any of the same name.
func NewRootCmd(extra ...CommandFunc) *cobra.Command {
	var cfg Config
	env := &EnvFlags{}
	root := &cobra.Command{
		Use:   "invledger",
		Short: "Event-sourced inventory ledger for flash sales",
		Long: `invledger sells stock from Redis in one Lua script per purchase, projects every
event into an append-only PostgreSQL ledger, and keeps the two honest.

Every flag can also be set with the environment variable named in its help.`,
		Version:       app.VersionDetail(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// What a command changes is recorded as done by the OS user.
			cmd.SetContext(ledger.WithActor(cmd.Context(), cliActor()))
			// cobra checks these after this hook, as errors of no kind.
			if err := errors.Join(cmd.ValidateRequiredFlags(), cmd.ValidateFlagGroups()); err != nil {
				return usageError{err}
			}
			return env.Err()
		},
	}
	env.fs = root.PersistentFlags()
	env.URL(&cfg.RedisURL, "redis-url", "INVLEDGER_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL")
	env.URLSlice(&cfg.RedisCluster, "redis-cluster", "INVLEDGER_REDIS_CLUSTER", "Redis Cluster: seed addresses, comma-separated, or one cluster URL redis[s]://user:pass@host:port?addr=host2:port2; when set, cluster mode is used")
	env.URLSlice(&cfg.RedisSentinels, "redis-sentinels", "INVLEDGER_REDIS_SENTINELS", "Sentinel addresses, comma-separated (the master's password and TLS from --redis-url), or one failover URL with ?master_name=; when set, the Sentinel-managed master is used")
	env.String(&cfg.RedisSentinelMaster, "redis-sentinel-master", "INVLEDGER_REDIS_SENTINEL_MASTER", "", "the master name the Sentinels monitor")
	env.URL(&cfg.DatabaseURL, "database-url", "INVLEDGER_DATABASE_URL", "", "PostgreSQL URL")
	env.Int(&cfg.Partitions, "partitions", "INVLEDGER_PARTITIONS", 16, "partition streams; fixed for a deployment")
	env.String(&cfg.LogLevel, "log-level", "INVLEDGER_LOG_LEVEL", "info", "debug, info, warn or error")
	env.String(&cfg.LogFormat, "log-format", "INVLEDGER_LOG_FORMAT", "text", "text, or json: one JSON object a line")
	env.Duration(&cfg.RedisTimeout, "redis-timeout", "INVLEDGER_REDIS_TIMEOUT", redisinventory.DefaultTimeout,
		"deadline of each purchase-path call to Redis; keep it well below the HTTP write timeout (15s)")
	env.Int(&cfg.MaxBatch, "max-batch", "INVLEDGER_MAX_BATCH", redisinventory.DefaultMaxBatch,
		"most concurrent purchase attempts of the SKUs of one partition sent to Redis in one script call (1 to 1000; 1 sends each alone)")
	env.Int(&cfg.BatchesInFlight, "batches-in-flight", "INVLEDGER_BATCHES_IN_FLIGHT", redisinventory.DefaultBatchesInFlight,
		"purchase script calls in flight (1 to 64): one per partition with purchases waiting, and up to this many for a partition while fewer are in flight in all")
	env.String(&cfg.StreamEntries, "stream-entries", "INVLEDGER_STREAM_ENTRIES", string(streamentry.EntriesPerCall),
		"per-call: one stream entry per purchase script call; per-event: one per event, the format of 1.0.0, while a 1.0.0 process still reads the streams")
	env.String(&cfg.SKULayout, "sku-layout", "INVLEDGER_SKU_LAYOUT", string(redisinventory.DefaultSKULayout),
		"where SKUs warmed or restored from now on keep their receipts and buyers: one-hash, in the SKU's hash; three-hashes, the layout of 1.0, while a 1.0 process still serves (docs/deploy.md)")
	env.Duration(&cfg.Holds.MaxTTL, "hold-max-ttl", "INVLEDGER_HOLD_MAX_TTL", domain.DefaultHoldMaxTTL, "longest ttl_seconds a hold may ask for")
	env.Secret(&cfg.SealKeys, "seal-keys", "INVLEDGER_SEAL_KEYS",
		"keys of the ledger's seals, id:secret comma-separated (secrets of 32+ bytes), the signing key first, older ones after it to verify what they sealed; kept outside PostgreSQL (unset: unkeyed seals, which resist no database superuser)")
	env.Duration(&cfg.Holds.DefaultTTL, "hold-default-ttl", "INVLEDGER_HOLD_DEFAULT_TTL", 0, "ttl of a hold that asks for none (default 15m, or --hold-max-ttl if shorter)")

	// config returns the validated settings for a command that needs them.
	config := func() (Config, error) {
		return cfg, cfg.Validate()
	}
	withApp := func(ctx context.Context, mode openMode, f func(*app.Application) error) error {
		c, err := config()
		if err != nil {
			return err
		}
		ac := c.AppConfig()
		if mode&quietFindings != 0 {
			ac.Alerter = quietAlerts{}
		}
		a, err := app.New(ctx, ac)
		if err != nil {
			return err
		}
		defer a.Close()
		if err := a.CheckSchema(ctx); err != nil {
			return err
		}
		if mode&withRedis != 0 {
			if err := a.PingRedis(ctx); err != nil {
				return err
			}
		}
		return f(a)
	}

	root.AddCommand(
		newMigrateCmd(config),
		newServeCmd(config),
		newDevCmd(&cfg),
		newTailCmd(&cfg),
		newDemoCmd(),
		newSKUCmd(withApp),
		newDeductCmd(withApp), newReleaseCmd(withApp), holdcmd.Command(), ordercmd.Command(),
		newRestoreRedisCmd(withApp),
		newRebuildProjectionsCmd(withApp),
		newArchiveBuyersCmd(withApp),
		newReconcileCmd(withApp),
		newAdjustCmd(),
		newDeadLettersCmd(withApp),
		movedBenchCmd(),
		newExportCmd(config),
		newAuditCmd(withApp, newAuditVerifyCmd(withApp)),
	)
	for _, f := range extra {
		c := f(config)
		if old, _, err := root.Find([]string{c.Name()}); err == nil && old != root {
			root.RemoveCommand(old)
		}
		root.AddCommand(c)
	}
	markUsageErrors(root)
	return root
}

// movedBenchCmd keeps `invledger bench` answering, since the load generator
// left the shipped binary for the tools module: it says where it went.
func movedBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "bench",
		Short:   "Moved: the load generator is tools/cmd/invledger-lab (make bench)",
		Example: "  invledger bench   # says where the load generator went",
		// Any command line of the old bench gets the answer, not a usage error.
		Args:               cobra.ArbitraryArgs,
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(*cobra.Command, []string) error {
			return errors.New("bench is not part of the server binary: run `make bench`, or `go run ./cmd/invledger-lab bench ...` in tools/ of a checkout (docs/cli.md)")
		},
	}
}

func newMigrateCmd(config func() (Config, error)) *cobra.Command {
	return &cobra.Command{
		Use:     "migrate",
		Short:   "Apply the embedded database migrations",
		Long:    "migrate brings the PostgreSQL schema up to date. It is safe to run repeatedly and from several processes at once.",
		Example: "  invledger migrate --database-url postgres://invledger@127.0.0.1:5432/invledger",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := config()
			if err != nil {
				return err
			}
			return app.Migrate(cmd.Context(), c.DatabaseURL, c.Logger())
		},
	}
}

// cliActor names a CLI run in the operations audit trail: cli:<os user>.
func cliActor() string {
	u, err := user.Current()
	if err != nil {
		return "cli:" + cmp.Or(os.Getenv("USER"), "unknown")
	}
	return "cli:" + u.Username
}

// openMode says what a command needs beyond PostgreSQL.
type openMode int

const (
	// sqlOnly commands read and write PostgreSQL alone, so they keep working
	// after Redis was lost, when an operator needs them most.
	sqlOnly openMode = 0
	// withRedis commands also talk to Redis: it is pinged first, so a Redis
	// that is down fails with what to fix rather than mid-command.
	withRedis openMode = 1 << iota
	// quietFindings drops reconciliation alerts: the command prints them.
	quietFindings
)

// appRunner opens the application for one command, runs f and closes it.
type appRunner func(ctx context.Context, mode openMode, f func(*app.Application) error) error

func newSKUCmd(withApp appRunner) *cobra.Command {
	cmd := &cobra.Command{Use: "sku", Short: "Create, warm, show and close SKUs"}

	var stock, limit int64
	create := &cobra.Command{
		Use:     "create SKU --stock N [--per-user-limit L]",
		Short:   "Define a SKU's initial stock and per-user limit",
		Example: "  invledger sku create phone-x --stock 100 --per-user-limit 2",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withApp(c.Context(), withRedis, func(a *app.Application) error {
				def, created, err := a.Service.CreateSKU(c.Context(), ledger.CreateSKUCommand{SKU: args[0], Stock: stock, PerUserLimit: limit})
				if err != nil {
					return err
				}
				return output.PrintJSON(c.OutOrStdout(), map[string]any{"sku": def.SKU().String(), "stock": def.InitialStock(),
					"per_user_limit": def.PerUserLimit(), "created": created})
			})
		},
	}
	create.Flags().Int64Var(&stock, "stock", 0, "initial stock")
	create.Flags().Int64Var(&limit, "per-user-limit", 1, "most units one user may hold")
	markRequired(create, "stock")

	warm := &cobra.Command{
		Use:     "warm SKU",
		Short:   "Load a SKU into Redis and append its stocked event; a no-op on a live SKU",
		Example: "  invledger sku warm phone-x",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withApp(c.Context(), withRedis, func(a *app.Application) error {
				res, err := a.Service.Warm(c.Context(), args[0])
				if err != nil {
					return err
				}
				return output.PrintJSON(c.OutOrStdout(), map[string]any{"sku": args[0], "stock": res.State.Stock, "seq": res.State.Seq,
					"status": res.State.Status, "stocked": res.Stocked})
			})
		},
	}
	var showFormat string
	show := &cobra.Command{
		Use:     "show SKU [--format json|table|csv]",
		Short:   "Show a SKU as Redis and the ledger each see it (JSON unless --format says otherwise)",
		Example: "  invledger sku show phone-x\n  invledger sku show phone-x --format table",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := output.CheckFormat(showFormat); err != nil {
				return err
			}
			return withApp(c.Context(), withRedis, func(a *app.Application) error {
				v, err := a.Service.State(c.Context(), args[0])
				if err != nil {
					return err
				}
				return output.Fields(c.OutOrStdout(), showFormat, []string{"sku", "state", "initial_stock", "per_user_limit",
					"redis_stock", "redis_seq", "ledger_stock", "ledger_seq", "ledger_watermark"},
					[]any{args[0], v.Status, v.Definition.InitialStock(), v.Definition.PerUserLimit(),
						v.RedisStock, v.RedisSeq, v.LedgerStock, v.LedgerSeq, v.LedgerWatermark})
			})
		},
	}
	// JSON by default, as before --format existed, so scripts keep working.
	show.Flags().StringVar(&showFormat, "format", output.JSON, "output format: json, table or csv")
	cmd.AddCommand(create, warm, show, newSKUListCmd(withApp), newSKUCloseCmd(withApp), newSKURetireCmd(withApp))
	return cmd
}

func newSKUListCmd(withApp appRunner) *cobra.Command {
	var (
		q      ledger.SKUListQuery
		format string
	)
	cmd := &cobra.Command{
		Use:   "list [--after SKU] [--limit N] [--format table|json|csv]",
		Short: "List the SKUs with their state in Redis and the ledger, a page at a time",
		Long: fmt.Sprintf(`list prints every defined SKU in byte order of its id, after --after, at
most --limit of them (1-%d), as GET /v1/skus answers: state, Redis stock and
seq (empty when Redis does not hold the SKU), ledger stock and seq. When more
SKUs follow, stderr names the --after of the next page.`, ledger.MaxAuditLimit),
		Example: "  invledger sku list --limit 50\n  invledger sku list --after phone-x --format csv > skus.csv",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkPage(format, q.Limit); err != nil {
				return err
			}
			return withApp(c.Context(), withRedis, func(a *app.Application) error {
				page, err := a.Catalog.List(c.Context(), q)
				if err != nil {
					return err
				}
				if err := output.SKUs(c.OutOrStdout(), format, httpapi.NewSKUPageJSON(page)); err != nil {
					return err
				}
				output.NextPage(c.ErrOrStderr(), page.NextAfter)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&q.After, "after", "", "list SKUs after this one, as a previous run printed it")
	cmd.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "most SKUs to list")
	output.Flag(cmd.Flags(), &format)
	return cmd
}

func newDeductCmd(withApp appRunner) *cobra.Command {
	var (
		sku, user, requestID string
		qty                  int64
	)
	cmd := &cobra.Command{
		Use:     "deduct --sku S --user U [--qty N] [--request-id R]",
		Short:   "Buy units for a user (exit status 2 when refused)",
		Long:    "deduct runs one purchase attempt. Re-running it with the same --request-id returns the original receipt instead of buying again.",
		Example: "  invledger deduct --sku phone-x --user u1 --qty 1 --request-id order-1001",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if requestID == "" {
				requestID = uuid.NewString()
			}
			c, err := ledger.NewDeductCommand(sku, user, qty, requestID)
			if err != nil {
				return err
			}
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				rc, err := a.Service.Deduct(cmd.Context(), c)
				if err != nil {
					return err
				}
				return output.PrintJSON(cmd.OutOrStdout(), map[string]any{"status": "ok", "seq": rc.Seq, "remaining": rc.Remaining,
					"event_id": rc.EventID, "request_id": rc.RequestID})
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "SKU id")
	cmd.Flags().StringVar(&user, "user", "", "user id")
	cmd.Flags().Int64Var(&qty, "qty", 1, "units to buy")
	cmd.Flags().StringVar(&requestID, "request-id", "", "idempotency key (default: a new UUID)")
	markRequired(cmd, "sku", "user")
	return cmd
}

func newReleaseCmd(withApp appRunner) *cobra.Command {
	var sku, user, requestID, reason string
	cmd := &cobra.Command{
		Use:     "release --sku S --user U --request-id R [--reason TEXT]",
		Short:   "Return a deduction's units to stock, exactly once",
		Example: "  invledger release --sku phone-x --user u1 --request-id order-1001 --reason 'payment failed'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := ledger.NewReleaseCommand(sku, user, requestID, reason)
			if err != nil {
				return err
			}
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				rel, err := a.Service.Release(cmd.Context(), c)
				if err != nil {
					return err
				}
				return output.PrintJSON(cmd.OutOrStdout(), map[string]any{"status": "released", "event_id": rel.EventID,
					"seq": rel.Seq, "already_released": rel.AlreadyReleased})
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "SKU id")
	cmd.Flags().StringVar(&user, "user", "", "user id of the deduction")
	cmd.Flags().StringVar(&requestID, "request-id", "", "request id of the deduction")
	cmd.Flags().StringVar(&reason, "reason", "", "why the units go back")
	markRequired(cmd, "sku", "user", "request-id")
	return cmd
}

// markRequired is cliflags.MarkRequired, which the command packages share.
var markRequired = cliflags.MarkRequired
