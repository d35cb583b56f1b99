package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/benchkit"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/tools/internal/bench"
	"github.com/invledger/invledger/tools/internal/benchlib"
)

func newBenchCmd(config func() (cli.Config, error)) *cobra.Command {
	var bc bench.Config
	cmd := &cobra.Command{
		Use:   "bench [--target lib|http|pg-direct] [--compare]",
		Short: "Load-test a flash sale: the library, the HTTP API, SQL-first, and the raw Redis ceiling",
		Long: `bench runs a closed-loop flash sale: --concurrency clients each send one
purchase attempt after another, for --duration or --requests attempts,
whichever ends first. Buyers are drawn from --users distinct users; a
--retry-share of attempts resend an earlier request (same request_id) and a
--repeat-share are earlier buyers trying again with a new request.

A sale has --stock units, so once they are gone every fresh attempt is a
sold_out refusal: the sold-out phase, which is most of a real flash sale.
--skus N (lib, and --compare's seed-like script) spreads them evenly over N
SKUs, each purchase buying one drawn uniformly (a retry goes to the SKU of
the request it resends).
Keep --stock below the number of attempts to get one; the report gives the
success path and the sold-out phase separately, with their throughput ratio.

Targets:
  lib        the Go library in-process (ledger.Service over --redis-url and
             --database-url), with the projector running in this process
             unless --projector=false (then a serve must run it).
  http       a running ` + "`invledger serve`" + ` at --url. --token is a gateway
             token; --operator-token an operator token, used to create, warm
             and read the bench SKU. The serve must run the projector.
  pg-direct  the SQL-first design on --database-url: each attempt is one
             transaction, UPDATE bench_stock SET num = num - 1 WHERE sku = $2
             AND num >= 1, plus an order insert guarded by UNIQUE (sku, user_id),
             in its own tables bench_stock and bench_orders (the ledger's
             tables are never touched; the run's rows are deleted afterwards).

The report: throughput, p50/p99/p999 latency, outcomes by reason, oversold
(from the receipts and from what Redis or the database holds; it must be 0),
and for lib and http how long after the last attempt the ledger equalled
Redis, the mean attempts per purchase script call and, where the library
exports invledger_purchase_batches_in_flight, the mean calls in flight. It
gives this process's CPU time per purchase (load generator included). For lib it adds what the sale cost Redis: used_memory before and
after, and MEMORY USAGE of the SKU's keys per purchase; with --retire, the
same once the SKU is closed, archived and retired (0 beyond its tombstone). It exits non-zero on any oversell, error, unexpected refusal, or a
ledger that does not catch up within --catch-up.

--compare starts a private redis-server and PostgreSQL in a temporary
directory (like demo) and runs, back to back at the same concurrency:
  raw        redis-benchmark running the service's own deduct script (the
             EVALSHA a real purchase sends, captured from one) with unique
             users and request ids: the ceiling; then the same on a sold-out
             SKU, the ceiling of refusals;
  lib, http  (an in-process serve on 127.0.0.1 with generated tokens);
  pg-direct  on the same PostgreSQL.
Unless --requests is given, raw runs for about --duration and lib and http
then make the same number of attempts (up to 4x --duration), with --stock
(default: half of them) so that half is the sold-out phase; pg-direct makes
at most that many attempts within --duration. It prints a table with the
ratios http/raw, lib/raw, http/pg-direct and lib/pg-direct against the goals.
The service runs with the command line's settings (--partitions, --max-batch,
--batches-in-flight, --sku-layout, ...) over the private servers.

bench only talks to this machine unless --allow-remote is given; every bench
SKU (named bench-..., raw-..., lib-..., http-...) stays in the ledger, which is
append-only, so run it against a test deployment.`,
		Example: `  invledger-lab bench --compare --concurrency 50
  invledger-lab bench --compare --concurrency 1000 --json > bench-1000.json
  invledger-lab bench --target lib --stock 5000 --requests 100000
  INVLEDGER_BENCH_TOKEN=... INVLEDGER_BENCH_OPERATOR_TOKEN=... invledger-lab bench --target http --url http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag has a non-zero default, so a zero here was typed
			// by the user: validate before Run's defaults could hide it.
			if err := bc.Validate(); err != nil {
				return err
			}
			return bench.Run(cmd.Context(), bc, benchDeps(config), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&bc.Target, "target", "lib", "what to load: lib, http or pg-direct")
	f.BoolVar(&bc.Compare, "compare", false, "run --targets back to back on a private Redis and PostgreSQL and print their ratios")
	f.StringSliceVar(&bc.Targets, "targets", bench.CompareTargets(), "with --compare: which of raw, lib, http, pg-direct to run")
	f.StringVar(&bc.URL, "url", "", "http: base URL of a running serve, e.g. http://127.0.0.1:8080")
	env := cli.NewEnvFlags(f)
	env.Secret(&bc.Token, "token", "INVLEDGER_BENCH_TOKEN", "http: gateway token secret")
	env.Secret(&bc.OperatorToken, "operator-token", "INVLEDGER_BENCH_OPERATOR_TOKEN", "http: operator token secret, to create, warm and read the SKU")
	f.BoolVar(&bc.AllowRemote, "allow-remote", false, "allow targets that are not on this machine")
	f.IntVar(&bc.Concurrency, "concurrency", 50, "clients with one attempt in flight each")
	f.DurationVar(&bc.Duration, "duration", 10*time.Second, "stop starting attempts after this long")
	f.Int64Var(&bc.Requests, "requests", 0, "stop after this many attempts (0: only --duration; with --compare: sized from the raw run)")
	f.Int64Var(&bc.Stock, "stock", 0, "units on sale, over all of --skus (default 10000; with --compare half of the attempts)")
	f.IntVar(&bc.SKUs, "skus", 1, "lib, and with --compare the seed-like script: spread the sale over this many SKUs, each purchase buying one drawn uniformly")
	f.IntVar(&bc.Users, "users", 10_000_000, "distinct buyers; attempts beyond them reuse users, who then already purchased")
	f.Float64Var(&bc.RetryShare, "retry-share", 0.1, "share of attempts that resend a recent request with the same request_id")
	f.Float64Var(&bc.RepeatShare, "repeat-share", 0.05, "share of attempts by a recent buyer with a new request_id")
	f.DurationVar(&bc.Timeout, "timeout", 30*time.Second, "longest wait for one attempt's answer")
	f.DurationVar(&bc.Drain, "drain", 30*time.Second, "how long attempts in flight may finish once issuing stops")
	f.DurationVar(&bc.CatchUp, "catch-up", 120*time.Second, "longest wait for the ledger to equal Redis after the run")
	f.BoolVar(&bc.Retire, "retire", false, "lib: close, archive and retire the SKU after the sale, and report Redis memory after retirement")
	f.BoolVar(&bc.Projector, "projector", true, "lib: run the projector in this process (turn off when a serve already projects this Redis)")
	f.IntVar(&bc.PGMaxConns, "pg-max-conns", 0, "pg-direct: connection pool size (0: one per client, up to the server's free max_connections)")
	f.StringVar(&bc.Durability, "durability", "strict", "with --compare: the private Redis's persistence, strict (appendfsync always) or everysec")
	f.StringVar(&bc.RedisBenchmark, "redis-benchmark", "redis-benchmark", "with --compare: the redis-benchmark binary")
	f.StringVar(&bc.Dir, "dir", "", "with --compare: keep the private servers' data here (default: a temporary directory, removed afterwards)")
	f.BoolVar(&bc.JSON, "json", false, "print the report as JSON")
	f.StringVar(&bc.JSONOut, "json-out", "", "also write the JSON report to this file")
	f.StringVar(&bc.CPUProfile, "cpuprofile", "", "write a CPU profile of this process (load generator and, for lib and --compare, the service) to this file; read it with go tool pprof")
	return cmd
}

// benchDeps wires the bench harness to this binary's application.
func benchDeps(config func() (cli.Config, error)) bench.Deps {
	return bench.Deps{
		// The only place the bench learns what a library error means: the
		// library's own error-code function, whose codes the metrics label
		// with and the HTTP API answers. The bench keeps no error table.
		ErrorCode: ledger.Outcome,
		Servers: func() (bench.Servers, error) {
			cfg, err := config()
			if err != nil {
				return bench.Servers{}, err
			}
			return benchSite{cfg: cfg}.servers(), nil
		},
		StartStack: func(ctx context.Context, o bench.StackOptions) (bench.Servers, func(), error) {
			// The service's settings are the command line's (--partitions,
			// --max-batch, --batches-in-flight, --sku-layout, ...); its
			// servers are the private stack's, so the settings are
			// validated once the stack's URLs replace the command line's.
			var cfg cli.Config
			if config != nil {
				cfg, _ = config()
			}
			cfg.LogLevel, cfg.LogFormat = "warn", "text"
			cfg.RedisCluster, cfg.RedisSentinels, cfg.RedisSentinelMaster = nil, nil, ""
			log := cfg.Logger()
			stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: o.Dir, AppendFsync: cli.AppendFsync(o.Durability), Logger: log, PostgresSettings: o.PGSettings})
			if err != nil {
				return bench.Servers{}, nil, err
			}
			cfg.RedisURL, cfg.DatabaseURL = stack.Redis.URL(), stack.DatabaseURL
			if config != nil {
				if err := cfg.Validate(); err != nil {
					stack.Stop()
					return bench.Servers{}, nil, err
				}
			}
			if err := app.Migrate(ctx, cfg.DatabaseURL, log); err != nil {
				stack.Stop()
				return bench.Servers{}, nil, err
			}
			return benchSite{cfg: cfg, durability: o.Durability}.servers(), stack.Stop, nil
		},
	}
}

// benchSite opens the application for the bench: over the servers on the
// command line (schema checked, never migrated), or over --compare's
// private stack (migrated when it started).
type benchSite struct {
	cfg        cli.Config
	durability string // the private stack's
}

func (b benchSite) servers() bench.Servers {
	addrs := b.cfg.RedisCluster
	if len(addrs) == 0 {
		if opts, err := redis.ParseURL(b.cfg.RedisURL); err == nil {
			addrs = []string{opts.Addr}
		}
	}
	return bench.Servers{RedisURL: b.cfg.RedisURL, RedisAddrs: addrs, DatabaseURL: b.cfg.DatabaseURL, Open: b.open}
}

func (b benchSite) open(ctx context.Context) (*bench.Site, error) {
	cfg := b.cfg
	a, err := app.New(ctx, cfg.AppConfig())
	if err != nil {
		return nil, err
	}
	if err := a.CheckSchema(ctx); err != nil {
		a.Close()
		return nil, err
	}
	if err := benchkit.LoadScripts(ctx, a); err != nil {
		a.Close()
		return nil, err
	}
	projCfg := cfg
	if projCfg.LogLevel == "info" { // its start-up lines would interleave with the progress line
		projCfg.LogLevel = "warn"
	}
	return &bench.Site{
		Library: &benchlib.Library{Service: a.Service, App: a},
		Keys:    benchkit.KeysOf(a),
		HookedLibrary: func(hook redis.Hook) (bench.Library, func(), error) {
			client, err := app.NewRedisClient(cfg.AppConfig(), 4)
			if err != nil {
				return nil, nil, err
			}
			client.AddHook(hook)
			svc, err := benchkit.ServiceOver(a, client)
			if err != nil {
				_ = client.Close()
				return nil, nil, err
			}
			return &benchlib.Library{Service: svc, App: a}, func() { _ = client.Close() }, nil
		},
		// The projector accepts whatever persistence the measured Redis has:
		// the bench measures purchases, not durability.
		Project: func(ctx context.Context) error {
			return cli.Serve(ctx, projCfg, cli.ServeSettings{Durability: app.DurabilityEverysec, Config: server.Config{
				Listen: "127.0.0.1:0", Components: []string{server.ComponentProjector}, ConsumerName: "invledger-bench", AllowVolatileRedis: true}})
		},
		Serve: func(ctx context.Context, tokens string, ready chan<- string) error {
			return cli.Serve(ctx, cfg, cli.ServeSettings{Durability: b.durability, Config: server.Config{
				Listen: "127.0.0.1:0", Tokens: tokens, Components: []string{server.ComponentAPI, server.ComponentProjector}, ConsumerName: "invledger-bench",
				OnListening: func(addr string) { ready <- addr }}})
		},
		Close: a.Close,
	}, nil
}
