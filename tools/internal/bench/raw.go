package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// The raw ceiling runs the service's own deduct script under
// redis-benchmark: the same EVALSHA, keys and arguments a purchase sends,
// captured from a real purchase, with the user, request id and event id
// made unique per call by redis-benchmark's __rand_int__. What the service
// adds on top of that (Go, go-redis, HTTP) is the gap to the ceiling.

// rawRandRange is redis-benchmark's -r: __rand_int__ becomes 0..r-1. It
// parses -r as a C int, so this is close to its largest value; collisions
// among a few million calls (a repeat buyer) are a few dozen.
const rawRandRange = 2_000_000_000

// scriptCapture records the first EVALSHA a client sends once armed.
type scriptCapture struct {
	mu    sync.Mutex
	armed bool
	args  []string
}

func (h *scriptCapture) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCapture) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.mu.Lock()
			if h.armed && h.args == nil {
				for _, a := range cmd.Args() {
					h.args = append(h.args, fmt.Sprint(a))
				}
			}
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *scriptCapture) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// rawScenario is one redis-benchmark command line for a SKU.
type rawScenario struct {
	sku, skuKey, benchStream string
	args                     []string // EVALSHA sha numkeys keys... argv...
	// bulky are the keys the run fills (the SKU hash, which holds a
	// one-hash SKU's buyers and receipts, the buyers and requests hashes of
	// the 1.0 layout, the redirected stream), deleted afterwards so later
	// targets do not pay for them in AOF rewrites. This leaves the raw SKUs
	// in the ledger alone, which is fine only on --compare's throwaway
	// stack.
	bulky []string
}

func (s *rawScenario) cleanup(ctx context.Context, rdb redis.UniversalClient) error {
	if err := rdb.Del(context.WithoutCancel(ctx), s.bulky...).Err(); err != nil {
		return fmt.Errorf("delete the raw run's keys: %w", err)
	}
	return nil
}

// DeductScriptCall returns the call a purchase of one unit of a new SKU on
// site sends to Redis: EVALSHA, the script's sha, numkeys, the keys and the
// arguments, with the buyer, the request id and the event id made unique
// by redis-benchmark's __rand_int__ and the stream redirected to a key no
// projector reads. It puts the SKU on sale with stock units and buys one.
func DeductScriptCall(ctx context.Context, site *Site, sku string, stock int64) ([]string, error) {
	s, err := prepareRawScenario(ctx, site, sku, stock)
	if err != nil {
		return nil, err
	}
	return s.args, nil
}

// prepareRawScenario puts a SKU on sale through the service, makes one real
// purchase on it with a client that captures the script call, and turns that
// call into a redis-benchmark command. stock 1 gives a SKU that the probe
// purchase sells out: every later call is a sold_out refusal.
func prepareRawScenario(ctx context.Context, site *Site, sku string, stock int64) (*rawScenario, error) {
	capture := &scriptCapture{}
	lib, release, err := site.HookedLibrary(capture)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := lib.PutOnSale(ctx, sku, stock); err != nil {
		return nil, err
	}
	const probeUser, probeRequest = "bench-probe-user", "bench-probe-request"
	capture.mu.Lock()
	capture.armed = true
	capture.mu.Unlock()
	rc, err := lib.Deduct(ctx, sku, probeUser, probeRequest)
	if err != nil {
		return nil, fmt.Errorf("probe purchase: %w", err)
	}
	capture.mu.Lock()
	args := slices.Clone(capture.args)
	capture.mu.Unlock()
	if len(args) < 3 {
		return nil, errors.New("the deduct script call was not seen: did the library stop using EVALSHA?")
	}
	keys := site.Keys
	s := &rawScenario{sku: sku, skuKey: keys.SKUKey(sku), bulky: []string{keys.SKUKey(sku), keys.BuyersKey(sku), keys.RequestsKey(sku)}}
	stream := keys.SKUStreamKey(sku)
	// The stream is redirected to a key of the same hash tag that no
	// projector reads, so the ceiling run does not feed the next target's
	// projector a backlog.
	s.benchStream = stream + ":bench-raw"
	s.bulky = append(s.bulky, s.benchStream)
	if s.args, err = rawBenchmarkArgs(args, probeUser, probeRequest, rc.EventID, stream, s.benchStream); err != nil {
		return nil, err
	}
	return s, nil
}

// rawBenchmarkArgs turns the script call captured from the probe purchase
// into redis-benchmark's: the probe's user, request id and event id become
// values drawn per call (__rand_int__), and its stream becomes benchStream.
// It knows the script's argument layout only as far as each of those
// values appearing exactly once: the one place to adapt when batch.lua's
// arguments change shape (a value sent twice, or one per SKU group).
func rawBenchmarkArgs(args []string, user, request, eventID, stream, benchStream string) ([]string, error) {
	// A v7 UUID's shape: 24 fixed characters, then 12 random digits.
	const eventPrefix = "0190b5a4-7a52-7c3e-9d1b-"
	out := slices.Clone(args)
	replaced := map[string]int{}
	for i, v := range out {
		if i < 2 {
			continue
		}
		switch v {
		case user:
			out[i] = "u__rand_int__"
		case request:
			out[i] = "r__rand_int__"
		case eventID:
			out[i] = eventPrefix + "__rand_int__"
		case stream:
			out[i] = benchStream
		default:
			continue
		}
		replaced[v]++
	}
	for _, v := range []string{user, request, eventID, stream} {
		if replaced[v] != 1 {
			return nil, fmt.Errorf("cannot map the deduct script's arguments (%q seen %d times in %q); update rawBenchmarkArgs", v, replaced[v], args)
		}
	}
	out[0] = "EVALSHA"
	return out, nil
}

// rawResult is what redis-benchmark printed.
type rawResult struct {
	requests   int64
	seconds    float64
	rps        float64
	p50, p99   float64
	p999, maxL float64
}

// runRedisBenchmark runs one scenario with clients connections for n calls.
func runRedisBenchmark(ctx context.Context, bin, redisURL string, s *rawScenario, clients, n int) (rawResult, string, error) {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return rawResult{}, "", fmt.Errorf("--redis-url: %w", err)
	}
	host, port, _ := strings.Cut(opts.Addr, ":")
	args := []string{"-h", host, "-p", port, "--dbnum", strconv.Itoa(opts.DB)}
	if opts.Password != "" {
		args = append(args, "-a", opts.Password)
	}
	args = append(args, "-c", strconv.Itoa(clients), "-n", strconv.Itoa(n), "-r", strconv.Itoa(rawRandRange))
	args = append(args, s.args...)
	cmdline := "redis-benchmark " + strings.Join(args, " ")
	if opts.Password != "" {
		cmdline = strings.Replace(cmdline, "-a "+opts.Password, "-a <password>", 1)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return rawResult{}, cmdline, fmt.Errorf("%s: %w: %s", bin, err, tail(stderr.String()+stdout.String()))
	}
	res, err := parseRedisBenchmark(stdout.String())
	if err != nil {
		return rawResult{}, cmdline, fmt.Errorf("read redis-benchmark's output: %w: %s", err, tail(stdout.String()))
	}
	if strings.Contains(stdout.String()+stderr.String(), "Error from server") {
		return res, cmdline, fmt.Errorf("redis-benchmark got errors from Redis: %s", tail(stderr.String()+stdout.String()))
	}
	return res, cmdline, nil
}

// parseRedisBenchmark reads redis-benchmark's (7.x) default output: the
// completion line, the percentile distribution (for p99.9) and the summary.
func parseRedisBenchmark(out string) (rawResult, error) {
	var r rawResult
	lines := strings.FieldsFunc(out, func(c rune) bool { return c == '\n' || c == '\r' })
	var haveSummary, haveP999 bool
	for i, line := range lines {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && f[1] == "requests" && f[2] == "completed" && f[3] == "in":
			r.requests, _ = strconv.ParseInt(f[0], 10, 64)
			r.seconds, _ = strconv.ParseFloat(f[4], 64)
		case len(f) >= 3 && strings.HasSuffix(f[0], "%") && f[1] == "<=" && !haveP999:
			if p, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64); err == nil && p >= 99.9 {
				r.p999, _ = strconv.ParseFloat(f[2], 64)
				haveP999 = true
			}
		case strings.HasPrefix(strings.TrimSpace(line), "throughput summary:") && len(f) >= 3:
			r.rps, _ = strconv.ParseFloat(f[2], 64)
		case len(f) == 6 && f[0] == "avg" && f[2] == "p50" && f[4] == "p99" && i+1 < len(lines):
			v := strings.Fields(lines[i+1])
			if len(v) == 6 {
				r.p50, _ = strconv.ParseFloat(v[2], 64)
				r.p99, _ = strconv.ParseFloat(v[4], 64)
				r.maxL, _ = strconv.ParseFloat(v[5], 64)
				haveSummary = true
			}
		}
	}
	if r.rps == 0 || !haveSummary || r.requests == 0 {
		return r, errors.New("no throughput summary found")
	}
	return r, nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}

// rawState reads the SKU's stock and seq from Redis.
func rawState(ctx context.Context, rdb redis.UniversalClient, s *rawScenario) (stock, seq int64, err error) {
	vals, err := rdb.HMGet(ctx, s.skuKey, "stock", "seq").Result()
	if err != nil {
		return 0, 0, err
	}
	for i, v := range vals {
		str, _ := v.(string)
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s field %d: %q", s.skuKey, i, str)
		}
		if i == 0 {
			stock = n
		} else {
			seq = n
		}
	}
	return stock, seq, nil
}

// measureScript runs redis-benchmark on one scenario for n calls and reports
// what it printed, the cores used, and Redis's own view of the script.
func (c *comparison) measureScript(ctx context.Context, s *rawScenario, label string, stock int64, n int, cpu *cpuSampler) (Report, rawResult, error) {
	cost, err := startScriptCost(ctx, c.rdb)
	if err != nil {
		return Report{}, rawResult{}, err
	}
	var before, after cpuSample
	if cpu != nil {
		before = cpu.sample()
	}
	res, cmdline, err := runRedisBenchmark(ctx, c.cfg.RedisBenchmark, c.srv.RedisURL, s, c.cfg.Concurrency, n)
	if cpu != nil {
		after = cpu.sample()
	}
	if err != nil {
		return Report{}, rawResult{}, err
	}
	rep := Report{
		Target: label, Clients: c.cfg.Concurrency, Stock: stock, SKU: s.sku, Attempts: res.requests, Seconds: res.seconds, Throughput: res.rps,
		Latency: LatencyMS{P50: res.p50, P99: res.p99, P999: res.p999, Max: res.maxL}, Command: cmdline, Outcomes: map[string]int64{},
	}
	if cpu != nil {
		rep.CPU = cpu.cores(before, after, true)
		if perCall := redisUsecPer(before, after, res.requests); stock > 1 {
			rep.RedisUsecPerPurchase = perCall
		} else {
			rep.RedisUsecPerRefusal = perCall
		}
	}
	return rep, res, cost.finish(ctx, c.rdb, &rep)
}

// runRawCeiling runs redis-benchmark on the scenario and checks in Redis what
// the calls did: each success-path call must have deducted, and sold-out
// calls must have written nothing.
func (c *comparison) runRawCeiling(ctx context.Context, s *rawScenario, label string, stock int64, n int, cpu *cpuSampler) (Report, error) {
	stock0, seq0, err := rawState(ctx, c.rdb, s)
	if err != nil {
		return Report{}, err
	}
	len0, err := c.rdb.XLen(ctx, s.benchStream).Result()
	if err != nil {
		return Report{}, err
	}
	rep, res, err := c.measureScript(ctx, s, label, stock, n, cpu)
	if err != nil {
		return Report{}, err
	}
	stock1, seq1, err := rawState(ctx, c.rdb, s)
	if err != nil {
		return Report{}, err
	}
	len1, err := c.rdb.XLen(ctx, s.benchStream).Result()
	if err != nil {
		return Report{}, err
	}
	deducted := stock0 - stock1
	rep.Sold, rep.SoldByTarget = deducted, deducted
	if deducted > 0 {
		rep.Outcomes["sold"] = deducted
	}
	if rest := res.requests - deducted; rest > 0 {
		if stock1 == 0 {
			rep.Outcomes["sold_out"] = rest
		} else {
			rep.Outcomes["already_purchased_or_replayed"] = rest
		}
	}
	phase := &PhaseReport{Attempts: res.requests, Seconds: res.seconds, Throughput: res.rps, P50: res.p50, P99: res.p99}
	if deducted > 0 {
		rep.SuccessPath = phase
	} else {
		rep.SoldOutPhase = phase
	}
	switch {
	case seq1-seq0 != deducted || len1-len0 != deducted:
		return rep, fmt.Errorf("%s: Redis deducted %d units but seq moved %d and the stream grew %d: the script did not run as the service runs it",
			label, deducted, seq1-seq0, len1-len0)
	case stock > 1 && deducted < res.requests*99/100:
		return rep, fmt.Errorf("%s: only %d of %d calls deducted: the script refused them (fenced after a Redis restart?)", label, deducted, res.requests)
	case stock1 < 0:
		rep.Oversold = -stock1
	}
	return rep, nil
}

// rawCeilingStock is the stock of the success-path SKU: more than any run sells.
const rawCeilingStock = domain.MaxQuantity

// checkRedisBenchmark checks that bin runs, and says how to get it.
func checkRedisBenchmark(ctx context.Context, bin string) error {
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("--redis-benchmark %q not found: install redis-tools (scripts/install-deps.sh does), or leave raw out of --targets", bin)
	}
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	if sc.Scan() && !strings.Contains(sc.Text(), "redis-benchmark") {
		return fmt.Errorf("%s does not look like redis-benchmark: %q", path, sc.Text())
	}
	return nil
}
