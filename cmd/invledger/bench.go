package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/domain"
)

// BenchConfig shapes `invledger bench`.
type BenchConfig struct {
	Target  string   // lib, http or pg-direct (without --compare)
	Compare bool     // run Targets back to back on a private stack
	Targets []string // with --compare: raw, lib, http, pg-direct

	URL           string // http: the serve's base URL
	Token         string // http: a gateway token
	OperatorToken string // http: an operator token (creates, warms and reads the SKU)
	AllowRemote   bool

	Concurrency int
	Duration    time.Duration
	Requests    int64
	Stock       int64
	Users       int
	RetryShare  float64
	RepeatShare float64

	Timeout    time.Duration // per attempt
	Drain      time.Duration // after issuing stops
	CatchUp    time.Duration // longest wait for the ledger to equal Redis
	Projector  bool          // lib: run the projector in this process
	PGMaxConns int           // pg-direct pool size; 0: one per client as far as max_connections allows

	Durability     string // --compare: the private Redis's fsync policy
	RedisBenchmark string // --compare: the redis-benchmark binary
	Dir            string // --compare: keep the private servers' data here
	JSON           bool
	JSONOut        string // also write the JSON report to this file
	CPUProfile     string // write a pprof CPU profile of this process here
}

var (
	benchTargetNames  = []string{"lib", "http", "pg-direct"}
	compareTargetList = []string{"raw", "lib", "http", "pg-direct"}
)

// Limits that keep a run bounded in time and memory.
const (
	benchMaxDuration    = 10 * time.Minute
	benchMaxRequests    = 20_000_000
	benchMaxConcurrency = 5000
	benchMaxUsers       = 100_000_000
)

func (c *BenchConfig) setDefaults() {
	if c.Target == "" {
		c.Target = "lib"
	}
	if len(c.Targets) == 0 {
		c.Targets = compareTargetList
	}
	if c.Concurrency == 0 {
		c.Concurrency = 50
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Users == 0 {
		c.Users = 10_000_000
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Drain == 0 {
		c.Drain = 30 * time.Second
	}
	if c.CatchUp == 0 {
		c.CatchUp = 120 * time.Second
	}
	if c.Durability == "" {
		c.Durability = "strict"
	}
	if c.RedisBenchmark == "" {
		c.RedisBenchmark = "redis-benchmark"
	}
}

// Validate reports every invalid setting at once, naming its flag.
func (c BenchConfig) Validate() error {
	var errs []error
	if c.Compare {
		if len(c.Targets) == 0 {
			errs = append(errs, errors.New("--targets must name at least one of "+strings.Join(compareTargetList, ",")))
		}
		for _, t := range c.Targets {
			if !slices.Contains(compareTargetList, t) {
				errs = append(errs, fmt.Errorf("--targets: unknown target %q (known: %s)", t, strings.Join(compareTargetList, ",")))
			}
		}
		if c.Durability != "strict" && c.Durability != "everysec" {
			errs = append(errs, fmt.Errorf("--durability must be strict or everysec, got %q", c.Durability))
		}
		if c.URL != "" || c.Token != "" || c.OperatorToken != "" {
			errs = append(errs, errors.New("--compare starts its own serve: drop --url, --token and --operator-token"))
		}
	} else {
		if !slices.Contains(benchTargetNames, c.Target) {
			errs = append(errs, fmt.Errorf("--target must be one of %s, got %q (or use --compare)", strings.Join(benchTargetNames, ", "), c.Target))
		}
		if c.Target == "http" {
			errs = append(errs, c.validateHTTP()...)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > benchMaxConcurrency {
		errs = append(errs, fmt.Errorf("--concurrency must be 1-%d, got %d", benchMaxConcurrency, c.Concurrency))
	}
	if c.Duration <= 0 || c.Duration > benchMaxDuration {
		errs = append(errs, fmt.Errorf("--duration must be above 0 and at most %s, got %s", benchMaxDuration, c.Duration))
	}
	if c.Requests < 0 || c.Requests > benchMaxRequests {
		errs = append(errs, fmt.Errorf("--requests must be 0 (no limit) to %d, got %d", benchMaxRequests, c.Requests))
	}
	if c.Stock < 0 || c.Stock > domain.MaxQuantity {
		errs = append(errs, fmt.Errorf("--stock must be 1-%d (or 0 for the default), got %d", domain.MaxQuantity, c.Stock))
	}
	if c.Users < 1 || c.Users > benchMaxUsers {
		errs = append(errs, fmt.Errorf("--users must be 1-%d, got %d", benchMaxUsers, c.Users))
	}
	for _, s := range []struct {
		flag string
		v    float64
	}{{"--retry-share", c.RetryShare}, {"--repeat-share", c.RepeatShare}} {
		if s.v < 0 || s.v > 0.9 {
			errs = append(errs, fmt.Errorf("%s must be between 0 and 0.9, got %g", s.flag, s.v))
		}
	}
	if c.RetryShare+c.RepeatShare > 0.9 {
		errs = append(errs, fmt.Errorf("--retry-share plus --repeat-share must be at most 0.9, got %g", c.RetryShare+c.RepeatShare))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--timeout", c.Timeout}, {"--drain", c.Drain}, {"--catch-up", c.CatchUp}} {
		if d.v <= 0 || d.v > benchMaxDuration {
			errs = append(errs, fmt.Errorf("%s must be above 0 and at most %s, got %s", d.flag, benchMaxDuration, d.v))
		}
	}
	if c.PGMaxConns < 0 || c.PGMaxConns > 10_000 {
		errs = append(errs, fmt.Errorf("--pg-max-conns must be 0 (automatic) to 10000, got %d", c.PGMaxConns))
	}
	return errors.Join(errs...)
}

func (c BenchConfig) validateHTTP() []error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("--target http needs --url, the base URL of a running `invledger serve` (e.g. http://127.0.0.1:8080)"))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, fmt.Errorf("--url %q is not an http(s) base URL such as http://127.0.0.1:8080", c.URL))
	case !c.AllowRemote && !isLoopbackHost(u.Hostname()):
		errs = append(errs, fmt.Errorf("--url %s is not on this machine: bench creates SKUs and buys them, so point it at a test deployment and pass --allow-remote", c.URL))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("--target http needs --token (or INVLEDGER_BENCH_TOKEN): a secret with role gateway from the serve's INVLEDGER_TOKENS"))
	}
	if c.OperatorToken == "" {
		errs = append(errs, errors.New("--target http needs --operator-token (or INVLEDGER_BENCH_OPERATOR_TOKEN): a secret with role operator, to create, warm and check the bench SKU"))
	}
	return errs
}

func isLoopbackHost(host string) bool {
	if host == "localhost" || strings.HasPrefix(host, "/") { // a Unix socket is local too
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkLocal refuses Redis and PostgreSQL on other machines unless
// --allow-remote is given.
func (c BenchConfig) checkLocal(cfg Config) error {
	if c.AllowRemote {
		return nil
	}
	var errs []error
	if c.Target == "lib" {
		addrs := cfg.RedisCluster
		if len(addrs) == 0 {
			if opts, err := redis.ParseURL(cfg.RedisURL); err == nil {
				addrs = []string{opts.Addr}
			}
		}
		for _, a := range addrs {
			if host, _, err := net.SplitHostPort(a); err == nil && !isLoopbackHost(host) {
				errs = append(errs, fmt.Errorf("--redis-url %s is not on this machine: bench creates SKUs and buys them, so use a test deployment and pass --allow-remote", a))
			}
		}
	}
	if pc, err := pgxpool.ParseConfig(cfg.DatabaseURL); err == nil && !isLoopbackHost(pc.ConnConfig.Host) {
		errs = append(errs, fmt.Errorf("--database-url host %s is not on this machine: bench writes to it, so use a test database and pass --allow-remote", pc.ConnConfig.Host))
	}
	return errors.Join(errs...)
}

func newBenchCmd(config func() (Config, error)) *cobra.Command {
	var bc BenchConfig
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
Redis. It exits non-zero on any oversell, error, unexpected refusal, or a
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

bench only talks to this machine unless --allow-remote is given; every bench
SKU (named bench-..., raw-..., lib-..., http-...) stays in the ledger, which is
append-only, so run it against a test deployment.`,
		Example: `  invledger bench --compare --concurrency 50
  invledger bench --compare --concurrency 1000 --json > bench-1000.json
  invledger bench --target lib --stock 5000 --requests 100000
  INVLEDGER_BENCH_TOKEN=... INVLEDGER_BENCH_OPERATOR_TOKEN=... invledger bench --target http --url http://127.0.0.1:8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every flag has a non-zero default, so a zero here was typed
			// by the user: validate before setDefaults could hide it.
			if err := bc.Validate(); err != nil {
				return err
			}
			bc.setDefaults()
			out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if bc.CPUProfile != "" {
				stop, err := startCPUProfile(bc.CPUProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if bc.Compare {
				rep, err := runCompare(cmd.Context(), bc, progress)
				if rep != nil {
					if werr := writeJSONFile(bc.JSONOut, rep); werr != nil {
						return werr
					}
					if bc.JSON {
						if perr := printJSON(out, rep); perr != nil {
							return perr
						}
					} else {
						rep.print(out)
					}
				}
				if err != nil {
					return err
				}
				return rep.failure()
			}
			var cfg Config
			if bc.Target != "http" {
				c, err := config()
				if err != nil {
					return err
				}
				if err := bc.checkLocal(c); err != nil {
					return err
				}
				cfg = c
			}
			rep, err := runSingle(cmd.Context(), bc, cfg, progress)
			if err != nil {
				return err
			}
			if err := writeJSONFile(bc.JSONOut, rep); err != nil {
				return err
			}
			if bc.JSON {
				if err := printJSON(out, rep); err != nil {
					return err
				}
			} else {
				rep.print(out)
			}
			if f := rep.failures(); len(f) > 0 {
				return errors.New(strings.Join(f, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&bc.Target, "target", "lib", "what to load: lib, http or pg-direct")
	f.BoolVar(&bc.Compare, "compare", false, "run --targets back to back on a private Redis and PostgreSQL and print their ratios")
	f.StringSliceVar(&bc.Targets, "targets", compareTargetList, "with --compare: which of raw, lib, http, pg-direct to run")
	f.StringVar(&bc.URL, "url", "", "http: base URL of a running serve, e.g. http://127.0.0.1:8080")
	f.StringVar(&bc.Token, "token", os.Getenv("INVLEDGER_BENCH_TOKEN"), "http: gateway token secret (env INVLEDGER_BENCH_TOKEN)")
	f.StringVar(&bc.OperatorToken, "operator-token", os.Getenv("INVLEDGER_BENCH_OPERATOR_TOKEN"), "http: operator token secret, to create, warm and read the SKU (env INVLEDGER_BENCH_OPERATOR_TOKEN)")
	f.BoolVar(&bc.AllowRemote, "allow-remote", false, "allow targets that are not on this machine")
	f.IntVar(&bc.Concurrency, "concurrency", 50, "clients with one attempt in flight each")
	f.DurationVar(&bc.Duration, "duration", 10*time.Second, "stop starting attempts after this long")
	f.Int64Var(&bc.Requests, "requests", 0, "stop after this many attempts (0: only --duration; with --compare: sized from the raw run)")
	f.Int64Var(&bc.Stock, "stock", 0, "units on sale (default 10000; with --compare half of the attempts)")
	f.IntVar(&bc.Users, "users", 10_000_000, "distinct buyers; attempts beyond them reuse users, who then already purchased")
	f.Float64Var(&bc.RetryShare, "retry-share", 0.1, "share of attempts that resend a recent request with the same request_id")
	f.Float64Var(&bc.RepeatShare, "repeat-share", 0.05, "share of attempts by a recent buyer with a new request_id")
	f.DurationVar(&bc.Timeout, "timeout", 30*time.Second, "longest wait for one attempt's answer")
	f.DurationVar(&bc.Drain, "drain", 30*time.Second, "how long attempts in flight may finish once issuing stops")
	f.DurationVar(&bc.CatchUp, "catch-up", 120*time.Second, "longest wait for the ledger to equal Redis after the run")
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

func writeJSONFile(path string, v any) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--json-out: %w", err)
	}
	if err := printJSON(f, v); err != nil {
		f.Close()
		return fmt.Errorf("--json-out: %w", err)
	}
	return f.Close()
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// loadAverage reads the 1-minute load average, to show how busy the machine
// was besides the bench; "" where /proc is not there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// benchSKU names a run's SKU uniquely: prefix, then the time in base 36.
func benchSKU(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

func (c BenchConfig) spec() loadSpec {
	return loadSpec{Concurrency: c.Concurrency, Duration: c.Duration, Requests: c.Requests, Users: c.Users,
		RetryShare: c.RetryShare, RepeatShare: c.RepeatShare, Timeout: c.Timeout, Drain: c.Drain}
}

// runSingle runs one target against the servers named by cfg (lib,
// pg-direct) or bc.URL (http).
func runSingle(ctx context.Context, bc BenchConfig, cfg Config, progress io.Writer) (*BenchReport, error) {
	stock := bc.Stock
	if stock == 0 {
		stock = 10_000
	}
	var t benchTarget
	switch bc.Target {
	case "lib":
		a, err := openApp(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		if err := a.checkSchema(ctx); err != nil {
			return nil, err
		}
		if err := a.inventory.Load(ctx); err != nil {
			return nil, err
		}
		t = newLibTarget(ctx, cfg, a, bc.Projector)
	case "http":
		t = newHTTPTarget(bc.URL, bc.Token, bc.OperatorToken, bc.Concurrency, bc.Timeout)
	case "pg-direct":
		pt, err := newPGTarget(ctx, cfg.DatabaseURL, bc.Concurrency, bc.PGMaxConns)
		if err != nil {
			return nil, err
		}
		t = pt
	}
	defer t.close()
	fmt.Fprintf(progress, "bench %s: %d clients, %s, %d units on sale, GOMAXPROCS %d\n", bc.Target, bc.Concurrency, bc.limitText(), stock, runtime.GOMAXPROCS(0))
	rep, err := runTarget(ctx, t, benchSKU("bench"), bc.spec(), stock, bc.CatchUp, progress, nil)
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

func (c BenchConfig) limitText() string {
	if c.Requests > 0 {
		return fmt.Sprintf("%d attempts or %s", c.Requests, c.Duration)
	}
	return c.Duration.String()
}
