package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// CompareReport is the result of bench --compare.
type CompareReport struct {
	Date        string `json:"date"`
	CPUs        int    `json:"cpus"`
	Clients     int    `json:"clients"`
	SKUs        int    `json:"skus"` // lib's and the seed-like script's sale
	Requests    int64  `json:"requests"`
	Stock       int64  `json:"stock"`
	AppendFsync string `json:"redis_appendfsync"`
	// LoadAverage is the machine's 1-minute load average before the run:
	// other work on the machine skews every figure.
	LoadAverage string   `json:"load_average_before"`
	Results     []Report `json:"results"`
	// Ratios compare success-path throughput (attempts/s before the first
	// sold_out), except the sold-out ratios, which divide a target's
	// sold-out phase by its own success path.
	Ratios map[string]float64 `json:"ratios"`
	Goals  []GoalResult       `json:"goals"`
}

// GoalResult is one performance goal, measured.
type GoalResult struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Goal  string  `json:"goal"`
	Met   bool    `json:"met"`
}

const (
	rawLabel        = "raw"
	rawSoldOutLabel = "raw-sold-out"
)

// Bounds of the request count --compare derives from the raw run.
const (
	compareMinRequests = 2_000
	compareMaxRequests = 5_000_000
)

// Result is the report of target, nil if it did not run.
func (r *CompareReport) Result(target string) *Report {
	for i := range r.Results {
		if r.Results[i].Target == target {
			return &r.Results[i]
		}
	}
	return nil
}

// comparison is one --compare run: its private stack and what it measured.
type comparison struct {
	cfg       Config
	errorCode func(error) string
	srv       Servers
	site      *Site
	rdb       *redis.Client // the private Redis, for what the library does not expose
	pg        *pgx.Conn     // the private PostgreSQL, likewise
	progress  io.Writer
	rep       *CompareReport
}

// runCompare runs cfg.Targets back to back on a private stack. It returns
// the report so far together with an error, so a failure late in the run
// still shows what was measured.
func runCompare(ctx context.Context, cfg Config, deps Deps, progress io.Writer) (*CompareReport, error) {
	if slices.Contains(cfg.Targets, "raw") {
		if err := checkRedisBenchmark(ctx, cfg.RedisBenchmark); err != nil {
			return nil, err
		}
	}
	dir := cfg.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "invledger-bench-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	fmt.Fprintf(progress, "starting private redis-server and PostgreSQL in %s ...\n", dir)
	// pg-direct holds one connection per client, as pgbench does; the
	// service's own pools need far fewer.
	srv, stop, err := deps.StartStack(ctx, StackOptions{Dir: dir, Durability: cfg.Durability,
		PGSettings: map[string]string{"max_connections": strconv.Itoa(max(200, cfg.Concurrency+100))}})
	if err != nil {
		return nil, fmt.Errorf("%w (scripts/install-deps.sh installs redis-server and postgresql)", err)
	}
	defer stop()
	c := &comparison{cfg: cfg, errorCode: deps.ErrorCode, srv: srv, progress: progress}
	if c.site, err = srv.Open(ctx); err != nil {
		return nil, err
	}
	defer c.site.Close()
	opts, err := redis.ParseURL(srv.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("the private Redis: %w", err)
	}
	c.rdb = redis.NewClient(opts)
	defer c.rdb.Close()
	if c.pg, err = pgx.Connect(ctx, srv.DatabaseURL); err != nil {
		return nil, fmt.Errorf("the private PostgreSQL: %w", err)
	}
	defer c.pg.Close(context.WithoutCancel(ctx))
	fsync, err := c.rdb.ConfigGet(ctx, "appendfsync").Result()
	if err != nil {
		return nil, fmt.Errorf("the private Redis: CONFIG GET appendfsync: %w", err)
	}
	c.rep = &CompareReport{Date: time.Now().Format(time.RFC3339), CPUs: runtime.NumCPU(), Clients: cfg.Concurrency, SKUs: cfg.SKUs, LoadAverage: loadAverage(),
		AppendFsync: fsync["appendfsync"], Ratios: map[string]float64{}}
	fmt.Fprintf(progress, "compare at %d clients on %d CPUs (Redis appendfsync %s); load generator, Redis, PostgreSQL and the service share them\n",
		cfg.Concurrency, c.rep.CPUs, c.rep.AppendFsync)
	return c.rep, c.run(ctx)
}

// run runs the targets and evaluates the report.
func (c *comparison) run(ctx context.Context) error {
	cfg, progress := c.cfg, c.progress
	cpu := newCPUSampler(ctx, c.rdb, c.pg)
	n := cfg.Requests
	if slices.Contains(cfg.Targets, "raw") {
		var err error
		if n, err = c.compareRaw(ctx, cpu); err != nil {
			return err
		}
	}
	stock := cfg.Stock
	if stock == 0 {
		stock = 10_000
		if n > 0 {
			stock = max(1, n/2)
		}
	}
	c.rep.Requests, c.rep.Stock = n, stock
	spec := cfg.spec()
	spec.Requests = n
	if n > 0 {
		spec.Duration = min(4*cfg.Duration, maxDuration)
	}

	for _, name := range cfg.Targets {
		var (
			r   Report
			err error
		)
		if err := c.settle(ctx); err != nil {
			return err
		}
		switch name {
		case "lib":
			if cfg.Projector {
				fmt.Fprintf(progress, "lib: the Go library in-process, projector running in-process\n")
			} else {
				fmt.Fprintf(progress, "lib: the Go library in-process, projector off (--projector=false)\n")
			}
			t := newLibTarget(ctx, c.site, c.errorCode, cfg.Projector)
			t.unprojected = !cfg.Projector
			r, err = runTarget(ctx, t, benchSKUs("lib", cfg.SKUs), spec, stock, cfg.CatchUp, progress, cpu)
			t.close()
			// A stopped projector's last XREADGROUP (BLOCK 1s) can still take
			// entries for up to a second, and they then wait 30s (the
			// projector's ReclaimAfter) for another consumer to claim them,
			// which would show up as the next target's ledger lag.
			sleepCtx(ctx, projectorBlockTime+500*time.Millisecond)
		case "http":
			r, err = c.compareHTTP(ctx, spec, stock, cpu)
		case "pg-direct":
			var t *pgTarget
			if t, err = newPGTarget(ctx, c.srv.DatabaseURL, cfg.Concurrency, cfg.PGMaxConns); err != nil {
				break
			}
			fmt.Fprintf(progress, "pg-direct: SQL-first on the same PostgreSQL, %d connections, at most %s\n", t.conns, cfg.Duration)
			pgSpec := spec
			pgSpec.Duration = cfg.Duration
			r, err = runTarget(ctx, t, []string{benchSKU("pg")}, pgSpec, stock, cfg.CatchUp, progress, cpu)
			t.close()
		default:
			continue
		}
		if err != nil {
			return err
		}
		c.rep.Results = append(c.rep.Results, r)
	}
	c.rep.evaluate()
	return nil
}

// compareRaw runs the redis-benchmark ceiling (success path, then sold out)
// and returns the request count for the other targets.
func (c *comparison) compareRaw(ctx context.Context, cpu *cpuSampler) (n int64, err error) {
	cfg, progress := c.cfg, c.progress
	ok, err := prepareRawScenario(ctx, c.site, benchSKU("raw"), rawCeilingStock)
	if err != nil {
		return 0, fmt.Errorf("raw: %w", err)
	}
	defer func() { err = errors.Join(err, ok.cleanup(ctx, c.rdb)) }()
	restore, err := pauseAOFRewrites(ctx, c.rdb)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, restore()) }()
	n = cfg.Requests
	if n == 0 {
		calN := max(50_000, 50*cfg.Concurrency)
		fmt.Fprintf(progress, "raw: calibrating with %d calls ...\n", calN)
		// A SKU of its own: redis-benchmark may draw the same __rand_int__
		// sequence twice, and the run's buyers would then be refused as
		// the calibration's.
		calSKU, err := prepareRawScenario(ctx, c.site, benchSKU("raw-cal"), rawCeilingStock)
		if err != nil {
			return 0, fmt.Errorf("raw calibration: %w", err)
		}
		cal, err := c.runRawCeiling(ctx, calSKU, rawLabel, rawCeilingStock, calN, nil)
		err = errors.Join(err, calSKU.cleanup(ctx, c.rdb))
		if err != nil {
			return 0, err
		}
		n = min(compareMaxRequests, max(compareMinRequests, 20*int64(cfg.Concurrency), int64(cal.Throughput*cfg.Duration.Seconds())))
		fmt.Fprintf(progress, "raw: %.0f calls/s while calibrating\n", cal.Throughput)
	}
	fmt.Fprintf(progress, "raw: redis-benchmark, the deduct script, %d calls at %d clients ...\n", n, cfg.Concurrency)
	raw, err := c.runRawCeiling(ctx, ok, rawLabel, rawCeilingStock, int(n), cpu)
	if err != nil {
		return 0, err
	}
	c.rep.Results = append(c.rep.Results, raw)
	fmt.Fprintf(progress, "%s: redis-benchmark, the seed's script plus one XADD, %d calls at %d clients over %d SKUs ...\n", seedLikeLabel, n, cfg.Concurrency, cfg.SKUs)
	seed, err := c.runSeedLike(ctx, int(n), cpu)
	if err != nil {
		return 0, err
	}
	c.rep.Results = append(c.rep.Results, seed)
	fmt.Fprintf(progress, "%s: the seed-like script on a sold-out SKU, %d calls ...\n", seedLikeSoldOutLabel, n)
	seedSoldOut, err := c.runSeedLikeSoldOut(ctx, int(n), cpu)
	if err != nil {
		return 0, err
	}
	c.rep.Results = append(c.rep.Results, seedSoldOut)
	so, err := prepareRawScenario(ctx, c.site, benchSKU("raw-so"), 1)
	if err != nil {
		return 0, fmt.Errorf("raw sold-out: %w", err)
	}
	defer func() { err = errors.Join(err, so.cleanup(ctx, c.rdb)) }()
	fmt.Fprintf(progress, "raw: redis-benchmark on a sold-out SKU, %d calls ...\n", n)
	soRep, err := c.runRawCeiling(ctx, so, rawSoldOutLabel, 1, int(n), cpu)
	if err != nil {
		return 0, err
	}
	c.rep.Results = append(c.rep.Results, soRep)
	return n, nil
}

// compareHTTP starts serve in this process on 127.0.0.1 with fresh tokens,
// runs the http target against it, and stops it.
func (c *comparison) compareHTTP(ctx context.Context, spec loadSpec, stock int64, cpu *cpuSampler) (Report, error) {
	gw, op := randomSecret(), randomSecret()
	tokens := "bench-gateway:gateway:" + gw + ",bench-operator:operator:" + op
	serveCtx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- c.site.Serve(serveCtx, tokens, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		stop()
		return Report{}, fmt.Errorf("http: serve did not start: %w", err)
	case <-time.After(60 * time.Second):
		stop()
		<-done
		return Report{}, errors.New("http: serve did not listen within 60s")
	}
	fmt.Fprintf(c.progress, "http: serve (api, projector) in this process at http://%s\n", addr)
	t := newHTTPTarget("http://"+addr, gw, op, c.cfg.Concurrency, c.cfg.Timeout)
	r, err := runTarget(ctx, t, []string{benchSKU("http")}, spec, stock, c.cfg.CatchUp, c.progress, cpu)
	t.close()
	stop()
	if serr := <-done; serr != nil && err == nil {
		err = fmt.Errorf("http: serve: %w", serr)
	}
	return r, err
}

// settle lets the previous target's after-effects finish before the next
// one starts, so it is not charged for them: Redis rewrites its AOF (which
// the previous runs grew; an automatic rewrite forks and copies the whole
// data set), PostgreSQL checkpoints, and Go collects garbage.
func (c *comparison) settle(ctx context.Context) error {
	fmt.Fprintf(c.progress, "settling: Redis AOF rewrite, PostgreSQL checkpoint ...\n")
	if err := c.rdb.BgRewriteAOF(ctx).Err(); err != nil && !strings.Contains(err.Error(), "already in progress") {
		return fmt.Errorf("settle: BGREWRITEAOF: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		info, err := c.rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("settle: INFO persistence: %w", err)
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	if _, err := c.pg.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("settle: CHECKPOINT: %w", err)
	}
	runtime.GC()
	sleepCtx(ctx, 500*time.Millisecond)
	return ctx.Err()
}

// projectorBlockTime is the projector's XREADGROUP BLOCK (projector.newSubscriber).
const projectorBlockTime = time.Second

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func randomSecret() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// floors are what the purchase path aims at, against the seed-like script
// at the same clients (over the same SKUs): lib's throughput and Redis CPU
// per purchase, by clients and SKUs. The lab notes
// docs/benchmarks/2026-12-02-batch-native-path.md and
// 2026-12-04-one-hash-per-sku.md say which it meets.
func (r *CompareReport) floors() (libThroughput, libRedisCPU float64) {
	switch {
	case r.SKUs > 1 && r.Clients >= 1000:
		return 1.8, 1.05
	case r.SKUs > 1:
		return 1.0, 1.0
	case r.Clients >= 1000:
		return 1.6, 0.6
	}
	return 0.95, 1.0
}

// evaluate computes the ratios and checks them against the goals
// of the compare runs (their lab notes are under docs/benchmarks).
func (r *CompareReport) evaluate() {
	success := func(t string) float64 {
		if b := r.Result(t); b != nil && b.SuccessPath != nil {
			return b.SuccessPath.Throughput
		}
		return 0
	}
	ratio := func(name string, num, den float64) (float64, bool) {
		if num <= 0 || den <= 0 {
			return 0, false
		}
		r.Ratios[name] = num / den
		return num / den, true
	}
	goal := func(name, text string, v float64, met bool) {
		r.Goals = append(r.Goals, GoalResult{Name: name, Value: v, Goal: text, Met: met})
	}
	scriptTime := func(t string) float64 {
		if b := r.Result(t); b != nil {
			return b.ScriptUsecPerCall
		}
		return 0
	}
	raw, lib, web, pg := success(rawLabel), success("lib"), success("http"), success("pg-direct")
	seed := success(seedLikeLabel)
	if r.SKUs <= 1 {
		// raw is one idle SKU's calls: beside a one-SKU seed-like script only.
		ratio("raw/seed-like", raw, seed)
		if v, ok := ratio("raw script time/seed-like", scriptTime(rawLabel), scriptTime(seedLikeLabel)); ok {
			goal("raw script time per call (one attempt) / seed-like", "<= 2", v, v <= 2)
		}
		if v, ok := ratio("raw sold-out script time/seed-like sold out", scriptTime(rawSoldOutLabel), scriptTime(seedLikeSoldOutLabel)); ok {
			goal("raw sold-out script time per call / seed-like", "<= 3", v, v <= 3)
		}
	}
	libGoal, cpuGoal := r.floors()
	if v, ok := ratio("lib/seed-like", lib, seed); ok {
		goal("lib throughput / seed-like script", fmt.Sprintf(">= %gx", libGoal), v, v >= libGoal)
	}
	if v, ok := ratio("http/seed-like", web, seed); ok {
		goal("http throughput / seed-like script", ">= 0.45", v, v >= 0.45)
	}
	if h := r.Result("http"); h != nil && h.SuccessPath != nil && h.SuccessPath.P99 > 0 {
		goal("http p99 (success path), ms", "<= 10", h.SuccessPath.P99, h.SuccessPath.P99 <= 10)
	}
	redisCost := func(t string, refusal bool) float64 {
		if b := r.Result(t); b != nil {
			if refusal {
				return b.RedisUsecPerRefusal
			}
			return b.RedisUsecPerPurchase
		}
		return 0
	}
	if v, ok := ratio("lib Redis CPU per purchase/seed-like", redisCost("lib", false), redisCost(seedLikeLabel, false)); ok {
		goal("lib Redis CPU per purchase / seed-like", fmt.Sprintf("<= %.2f", cpuGoal), v, v <= cpuGoal)
	}
	if v, ok := ratio("lib Redis CPU per refusal/seed-like sold out", redisCost("lib", true), redisCost(seedLikeSoldOutLabel, true)); ok {
		goal("lib Redis CPU per refusal / seed-like", "<= 0.60", v, v <= 0.60)
	}
	ratio("lib/raw", lib, raw)
	ratio("http/raw", web, raw)
	if h, w := r.Result("http"), r.Result(rawLabel); h != nil && w != nil && h.SuccessPath != nil && w.SuccessPath != nil {
		ratio("http_p99/raw_p99", h.SuccessPath.P99, w.SuccessPath.P99)
	}
	pgGoal := 30.0
	if r.Clients >= 1000 {
		pgGoal = 1000
	}
	if v, ok := ratio("lib/pg-direct", lib, pg); ok {
		goal("lib throughput / pg-direct", fmt.Sprintf(">= %.0fx", pgGoal), v, v >= pgGoal)
	}
	if v, ok := ratio("http/pg-direct", web, pg); ok {
		goal("http throughput / pg-direct", fmt.Sprintf(">= %.0fx", pgGoal), v, v >= pgGoal)
	}
	for _, t := range []string{"lib", "http"} {
		if b := r.Result(t); b != nil && b.SoldOutRatio > 0 {
			r.Ratios[t+"_sold_out/success"] = b.SoldOutRatio
		}
	}
	if so := r.Result(rawSoldOutLabel); so != nil && raw > 0 {
		r.Ratios["raw_sold_out/success"] = so.Throughput / raw
	}
	for _, t := range []string{"lib", "http"} {
		if b := r.Result(t); b != nil {
			goal(fmt.Sprintf("%s errors at %d clients (besides contract outcomes)", t, r.Clients), "0", float64(b.Errors), b.Errors == 0)
		}
	}
	for _, b := range r.Results {
		goal(b.Target+" oversold", "0", float64(b.Oversold), b.Oversold == 0)
	}
}

// failure is the error bench --compare exits with: correctness failures
// only. Missed performance goals are reported, not failed.
func (r *CompareReport) failure() error {
	var f []string
	for i := range r.Results {
		f = append(f, r.Results[i].failures()...)
	}
	if len(f) > 0 {
		return errors.New(strings.Join(f, "; "))
	}
	return nil
}

func (r *CompareReport) print(w io.Writer) {
	fmt.Fprintf(w, "\ninvledger-lab bench --compare, %s, %d CPUs (load average %s before), %d clients, Redis appendfsync %s\n",
		r.Date, r.CPUs, r.LoadAverage, r.Clients, r.AppendFsync)
	fmt.Fprintf(w, "%d attempts per target (pg-direct: as many as fit its time limit), %d units on sale", r.Requests, r.Stock)
	if r.SKUs > 1 {
		fmt.Fprintf(w, ", lib's and the seed-like script's spread over %d SKUs (raw: one idle SKU's calls)", r.SKUs)
	}
	fmt.Fprintf(w, "\n\n")
	fmt.Fprintf(w, "%-13s %9s %8s %10s %10s %10s %8s %8s %8s %7s %8s %10s\n",
		"target", "attempts", "seconds", "overall/s", "success/s", "soldout/s", "p50", "p99", "p999", "errors", "oversold", "ledger")
	for _, b := range r.Results {
		phase := func(p *PhaseReport) string {
			if p == nil || p.Attempts == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f", p.Throughput)
		}
		ledgerCol := "-"
		if b.LedgerEqualsRedis != nil {
			ledgerCol = "NO"
			if *b.LedgerEqualsRedis {
				ledgerCol = fmt.Sprintf("+%.2fs", *b.LedgerEqualsRedisAfter)
			}
		}
		fmt.Fprintf(w, "%-13s %9d %8.2f %10.0f %10s %10s %8s %8s %8s %7d %8d %10s\n", b.Target, b.Attempts, b.Seconds, b.Throughput,
			phase(b.SuccessPath), phase(b.SoldOutPhase), ms(b.Latency.P50), ms(b.Latency.P99), ms(b.Latency.P999), b.Errors, b.Oversold, ledgerCol)
	}
	fmt.Fprintf(w, "\nsuccess-path latency (before the first sold_out)\n")
	for _, b := range r.Results {
		if p := b.SuccessPath; p != nil {
			fmt.Fprintf(w, "  %-13s p50 %-8s p99 %s\n", b.Target, ms(p.P50), ms(p.P99))
		}
	}
	fmt.Fprintf(w, "\ncores used during each run (of %d): bench process / redis-server / postgres\n", r.CPUs)
	for _, b := range r.Results {
		if c := b.CPU; c != nil {
			who := "bench"
			if b.Target == rawLabel || b.Target == rawSoldOutLabel || b.Target == seedLikeLabel || b.Target == seedLikeSoldOutLabel {
				who = "redis-benchmark"
			}
			fmt.Fprintf(w, "  %-13s %s %.2f  redis %.2f  postgres %.2f\n", b.Target, who, c.Bench, c.Redis, c.Postgres)
		}
	}
	fmt.Fprintf(w, "\ngoals (throughput ratios use the success path)\n")
	for _, g := range r.Goals {
		state := "met"
		if !g.Met {
			state = "MISSED"
		}
		fmt.Fprintf(w, "  %-52s %10s  goal %-8s %s\n", g.Name, formatRatio(g.Value), g.Goal, state)
	}
	for _, name := range []string{"lib/raw", "http/raw", "http_p99/raw_p99", "lib_sold_out/success", "raw_sold_out/success"} {
		if v, ok := r.Ratios[name]; ok {
			fmt.Fprintf(w, "  %-52s %10s  (reference)\n", name, formatRatio(v))
		}
	}
	fmt.Fprintf(w, "\nredis-server CPU per purchase (before the first sold_out) and per refusal (after it), this process's CPU per purchase,\n"+
		"mean batch size and mean purchase script calls in flight (- where the library does not export them)\n")
	for _, b := range r.Results {
		if b.RedisUsecPerPurchase > 0 || b.RedisUsecPerRefusal > 0 || b.MeanBatchSize > 0 {
			inFlight := "-"
			if b.MeanCallsInFlight > 0 {
				inFlight = fmt.Sprintf("%.2f", b.MeanCallsInFlight)
			}
			self := "-"
			if b.BenchUsecPerPurchase > 0 {
				self = fmt.Sprintf("%.2f", b.BenchUsecPerPurchase)
			}
			fmt.Fprintf(w, "  %-18s %7.2f µs/purchase  %7.2f µs/refusal  bench %7s µs/purchase  batch %5.1f  in flight %5s\n",
				b.Target, b.RedisUsecPerPurchase, b.RedisUsecPerRefusal, self, b.MeanBatchSize, inFlight)
		}
	}
	fmt.Fprintf(w, "\nRedis's view of each script, run alone (INFO commandstats, aof_current_size)\n")
	for _, b := range r.Results {
		if b.ScriptUsecPerCall > 0 {
			fmt.Fprintf(w, "  %-13s usec_per_call %6.2f  AOF bytes per call %6.0f\n", b.Target, b.ScriptUsecPerCall, b.AOFBytesPerCall)
		}
	}
	for _, b := range r.Results {
		for _, n := range b.Notes {
			fmt.Fprintf(w, "  note (%s): %s\n", b.Target, n)
		}
		for _, e := range b.ErrorSamples {
			fmt.Fprintf(w, "  error (%s): %s\n", b.Target, e)
		}
	}
	if raw := r.Result(rawLabel); raw != nil {
		fmt.Fprintf(w, "\nraw ceiling command:\n  %s\n", raw.Command)
	}
}

func formatRatio(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
