package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Report is the result of one target's run, as printed and as --json.
type Report struct {
	Target       string           `json:"target"`
	Clients      int              `json:"clients"`
	Stock        int64            `json:"stock"`
	SKU          string           `json:"sku,omitempty"` // the first, with --skus
	SKUs         int              `json:"skus,omitempty"`
	Attempts     int64            `json:"attempts"`
	Seconds      float64          `json:"seconds"`
	Throughput   float64          `json:"throughput_per_s"`
	Latency      LatencyMS        `json:"latency_ms"`
	SuccessPath  *PhaseReport     `json:"success_path,omitempty"`
	SoldOutPhase *PhaseReport     `json:"sold_out_phase,omitempty"`
	SoldOutRatio float64          `json:"sold_out_vs_success,omitempty"`
	Outcomes     map[string]int64 `json:"outcomes"`
	// Sold counts the deductions the target acknowledged (each once, however
	// often it was retried); SoldByTarget is what Redis or the database holds.
	Sold         int64    `json:"sold"`
	SoldByTarget int64    `json:"sold_by_target"`
	Oversold     int64    `json:"oversold"`
	Errors       int64    `json:"errors"`
	ErrorSamples []string `json:"error_samples,omitempty"`
	// LedgerEqualsRedis is set for targets with a ledger (lib, http):
	// whether, and how long after the last attempt, the ledger equalled Redis.
	LedgerEqualsRedis      *bool     `json:"ledger_equals_redis,omitempty"`
	LedgerEqualsRedisAfter *float64  `json:"ledger_equals_redis_after_s,omitempty"`
	CPU                    *CPUCores `json:"cpu_cores,omitempty"`
	// Memory is set for lib: what the sale cost Redis.
	Memory  *MemoryReport `json:"redis_memory,omitempty"`
	Command string        `json:"command,omitempty"`
	// ScriptUsecPerCall and AOFBytesPerCall are Redis's own view of a
	// script run alone under redis-benchmark (raw, raw-sold-out,
	// seed-like): INFO commandstats' usec_per_call for EVALSHA, and the
	// growth of aof_current_size per call.
	ScriptUsecPerCall float64 `json:"script_usec_per_call,omitempty"`
	// RedisUsecPerPurchase is redis-server's CPU time per unit sold before
	// the first sold_out answer, and RedisUsecPerRefusal per attempt after
	// it (from /proc, sampled at the first sold_out).
	RedisUsecPerPurchase float64 `json:"redis_usec_per_purchase,omitempty"`
	RedisUsecPerRefusal  float64 `json:"redis_usec_per_refusal,omitempty"`
	// BenchUsecPerPurchase is this process's CPU time (getrusage) per unit
	// sold before the first sold_out: the load generator and, for lib, the
	// service's Go side.
	BenchUsecPerPurchase float64 `json:"bench_usec_per_purchase,omitempty"`
	// MeanBatchSize is the mean number of attempts per purchase script call
	// (lib and http), from invledger_purchase_batch_size.
	MeanBatchSize float64 `json:"mean_batch_size,omitempty"`
	// MeanCallsInFlight is the mean of invledger_purchase_batches_in_flight
	// sampled during the run, where the library exports it.
	MeanCallsInFlight float64  `json:"mean_calls_in_flight,omitempty"`
	AOFBytesPerCall   float64  `json:"aof_bytes_per_call,omitempty"`
	Notes             []string `json:"notes,omitempty"`
}

// LatencyMS holds latency percentiles in milliseconds. redis-benchmark does
// not report p999, so it is 0 for the raw ceiling.
type LatencyMS struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// PhaseReport is the part of a run before (success path) or after (sold-out
// phase) the first sold_out answer.
type PhaseReport struct {
	Attempts   int64   `json:"attempts"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughput_per_s"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
}

// minPhase is the shortest phase whose throughput the report trusts.
const (
	minPhaseSeconds  = 0.2
	minPhaseAttempts = 200
)

// summarize turns a run's records into a report. Successes are told apart
// by the receipt's seq: the first answer with a seq sold, later ones with
// the same seq were replays of a retried request.
func summarize(target string, spec loadSpec, stock int64, run *loadRun) Report {
	r := Report{Target: target, Clients: spec.Concurrency, Stock: stock, Outcomes: map[string]int64{}}
	var counts [numOutcomes]int64
	lat := make([]uint32, 0, len(run.recs))
	var soldOutAt uint32 = ^uint32(0)
	for _, rec := range run.recs {
		counts[rec.out]++
		if rec.out == outUnfinished {
			continue
		}
		lat = append(lat, rec.latency)
		if rec.out == outSoldOut {
			soldOutAt = min(soldOutAt, rec.done)
		}
	}
	slices.Sort(run.seqs)
	distinct := int64(len(slices.Compact(run.seqs)))
	counts[outSold] += distinct
	counts[outReplayed] += counts[outOK] - distinct
	counts[outOK] = 0
	for o, n := range counts {
		if n > 0 {
			r.Outcomes[outcome(o).String()] = n
		}
		if outcome(o).unexpected() {
			r.Errors += n
		}
	}
	r.Sold = counts[outSold]
	r.Attempts = int64(len(lat))
	r.Seconds = run.stop.Sub(run.start).Seconds()
	if r.Seconds > 0 {
		r.Throughput = float64(r.Attempts) / r.Seconds
	}
	r.Latency = latencies(lat)
	r.ErrorSamples = run.errSamples
	if counts[outUnfinished] > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d attempts were still in flight when --drain ran out; they are left out of throughput and latency", counts[outUnfinished]))
	}

	// Phases: before and after the first sold_out answer.
	last := uint32(r.Seconds * 1e6)
	var before, after []uint32
	for _, rec := range run.recs {
		switch {
		case rec.out == outUnfinished:
		case rec.done < soldOutAt:
			before = append(before, rec.latency)
		default:
			after = append(after, rec.latency)
		}
	}
	phase := func(lat []uint32, from, to uint32) *PhaseReport {
		p := &PhaseReport{Attempts: int64(len(lat)), Seconds: float64(to-from) / 1e6}
		if p.Seconds > 0 {
			p.Throughput = float64(p.Attempts) / p.Seconds
		}
		l := latencies(lat)
		p.P50, p.P99 = l.P50, l.P99
		return p
	}
	if soldOutAt == ^uint32(0) {
		r.SuccessPath = phase(before, 0, last)
		r.Notes = append(r.Notes, "stock never ran out: no sold-out phase (lower --stock or raise --requests/--duration)")
		return r
	}
	r.SuccessPath = phase(before, 0, soldOutAt)
	r.SoldOutPhase = phase(after, soldOutAt, max(last, soldOutAt))
	short := func(p *PhaseReport) bool { return p.Seconds < minPhaseSeconds || p.Attempts < minPhaseAttempts }
	switch {
	case short(r.SuccessPath) || short(r.SoldOutPhase):
		r.Notes = append(r.Notes, fmt.Sprintf("a phase is shorter than %.1fs or %d attempts, so the sold-out/success ratio is not reported; "+
			"balance --stock against --requests/--duration", minPhaseSeconds, minPhaseAttempts))
	case r.SuccessPath.Throughput > 0:
		r.SoldOutRatio = r.SoldOutPhase.Throughput / r.SuccessPath.Throughput
	}
	return r
}

func latencies(us []uint32) LatencyMS {
	if len(us) == 0 {
		return LatencyMS{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	pct := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1000
	}
	return LatencyMS{P50: pct(0.50), P99: pct(0.99), P999: pct(0.999), Max: float64(s[len(s)-1]) / 1000}
}

// applyCheck records what the target says it sold and derives oversold
// from both counts: the receipts the bench got and the target's own state.
func (r *Report) applyCheck(soldByTarget, remaining int64) {
	r.SoldByTarget = soldByTarget
	r.Oversold = max(0, r.Sold-r.Stock, soldByTarget-r.Stock, -remaining)
	if soldByTarget != r.Sold {
		r.Notes = append(r.Notes, fmt.Sprintf("the target holds %d deductions but acknowledged %d: %d answers were lost to timeouts or errors",
			soldByTarget, r.Sold, soldByTarget-r.Sold))
	}
}

// perPurchase sets the CPU per purchase of Redis and of this process
// between two samples, over units sold.
func (r *Report) perPurchase(a, b cpuSample, units int64) {
	r.RedisUsecPerPurchase = redisUsecPer(a, b, units)
	r.BenchUsecPerPurchase = usecPer(b.self-a.self, units)
}

func (r *Report) setLedger(caughtUp bool, lag time.Duration) {
	s := lag.Seconds()
	r.LedgerEqualsRedis, r.LedgerEqualsRedisAfter = &caughtUp, &s
}

// failures returns what makes a run fail: oversell, errors, a ledger that did
// not catch up.
func (r *Report) failures() []string {
	var f []string
	if r.Oversold > 0 {
		f = append(f, fmt.Sprintf("%s oversold %d units", r.Target, r.Oversold))
	}
	if r.Errors > 0 {
		f = append(f, fmt.Sprintf("%s: %d attempts ended in errors or unexpected refusals (%s)", r.Target, r.Errors, strings.Join(r.ErrorSamples, "; ")))
	}
	if r.LedgerEqualsRedis != nil && !*r.LedgerEqualsRedis {
		f = append(f, fmt.Sprintf("%s: the ledger did not equal Redis within --catch-up; is the projector running?", r.Target))
	}
	return f
}

func (r *Report) print(w io.Writer) {
	if r.SKUs > 1 {
		fmt.Fprintf(w, "\n%s: %d clients, %d units on sale over %d SKUs (%s ...)\n", r.Target, r.Clients, r.Stock, r.SKUs, r.SKU)
	} else {
		fmt.Fprintf(w, "\n%s: %d clients, %d units on sale (sku %s)\n", r.Target, r.Clients, r.Stock, r.SKU)
	}
	fmt.Fprintf(w, "  attempts             %d in %.2fs\n", r.Attempts, r.Seconds)
	fmt.Fprintf(w, "  throughput           %.0f/s\n", r.Throughput)
	fmt.Fprintf(w, "  latency              p50 %s  p99 %s  p999 %s  max %s\n", ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.P999), ms(r.Latency.Max))
	if p := r.SuccessPath; p != nil {
		fmt.Fprintf(w, "  success path         %.0f/s over %.2fs (%d attempts), p50 %s p99 %s\n", p.Throughput, p.Seconds, p.Attempts, ms(p.P50), ms(p.P99))
	}
	if p := r.SoldOutPhase; p != nil {
		fmt.Fprintf(w, "  sold-out phase       %.0f/s over %.2fs (%d attempts), p50 %s p99 %s\n", p.Throughput, p.Seconds, p.Attempts, ms(p.P50), ms(p.P99))
	}
	if r.SoldOutRatio > 0 {
		fmt.Fprintf(w, "  sold-out vs success  %.2fx\n", r.SoldOutRatio)
	}
	fmt.Fprintf(w, "  outcomes             %s\n", formatOutcomes(r.Outcomes))
	fmt.Fprintf(w, "  oversold             %d (acknowledged %d, target holds %d, stock %d)\n", r.Oversold, r.Sold, r.SoldByTarget, r.Stock)
	fmt.Fprintf(w, "  errors               %d\n", r.Errors)
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(w, "    e.g. %s\n", e)
	}
	if r.LedgerEqualsRedis != nil {
		if *r.LedgerEqualsRedis {
			fmt.Fprintf(w, "  ledger equals Redis  yes, %.2fs after the last attempt\n", *r.LedgerEqualsRedisAfter)
		} else {
			fmt.Fprintf(w, "  ledger equals Redis  NO after %.0fs\n", *r.LedgerEqualsRedisAfter)
		}
	}
	if c := r.CPU; c != nil {
		fmt.Fprintf(w, "  cores used           bench %.2f  redis %.2f  postgres %.2f\n", c.Bench, c.Redis, c.Postgres)
	}
	if r.BenchUsecPerPurchase > 0 {
		fmt.Fprintf(w, "  bench process CPU    %.2f µs per purchase (load generator included)\n", r.BenchUsecPerPurchase)
	}
	if r.RedisUsecPerPurchase > 0 || r.RedisUsecPerRefusal > 0 {
		fmt.Fprintf(w, "  redis CPU            %.2f µs per purchase, %.2f µs per refusal after sold out\n", r.RedisUsecPerPurchase, r.RedisUsecPerRefusal)
	}
	if r.MeanBatchSize > 0 {
		fmt.Fprintf(w, "  mean batch size      %.1f attempts per script call\n", r.MeanBatchSize)
	}
	if r.MeanCallsInFlight > 0 {
		fmt.Fprintf(w, "  calls in flight      %.2f on average\n", r.MeanCallsInFlight)
	}
	if r.Memory != nil {
		r.Memory.print(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func formatOutcomes(m map[string]int64) string {
	var parts []string
	for _, name := range outcomeNames {
		if n, ok := m[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", name, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fs", v/1000)
}
