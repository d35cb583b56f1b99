package bench

import (
	"strings"
	"testing"
	"time"
)

func TestLatencies(t *testing.T) {
	us := make([]uint32, 1000)
	for i := range us {
		us[len(us)-1-i] = uint32(i+1) * 1000 // 1ms..1000ms, unsorted
	}
	got := latencies(us)
	want := LatencyMS{P50: 501, P99: 991, P999: 1000, Max: 1000}
	if got != want {
		t.Fatalf("latencies = %+v, want %+v", got, want)
	}
	if us[0] != 1_000_000 {
		t.Error("latencies sorted its argument")
	}
	if latencies(nil) != (LatencyMS{}) {
		t.Error("no latencies gave figures")
	}
}

// TestSummarize checks the counting: receipts with the same seq are one
// sale and its replays, unfinished attempts stay out of the figures, and
// the phases split at the first sold_out.
func TestSummarize(t *testing.T) {
	start := time.Unix(1000, 0)
	run := &loadRun{start: start, stop: start.Add(2 * time.Second)}
	for i := range 600 {
		run.recs = append(run.recs, benchRecord{done: uint32(i) * 1000, latency: 500, out: outOK})
		run.seqs = append(run.seqs, int64(i%400)+1) // 400 sales, 200 replays
	}
	for i := range 300 {
		run.recs = append(run.recs, benchRecord{done: 1_000_000 + uint32(i)*3000, latency: 200, out: outSoldOut})
	}
	run.recs = append(run.recs,
		benchRecord{done: 1_500_000, latency: 100, out: outAlready},
		benchRecord{done: 1_600_000, latency: 30_000_000, out: outTimeout},
		benchRecord{done: 1_900_000, latency: 40_000_000, out: outUnfinished})
	run.errSamples = []string{"timeout: context deadline exceeded"}
	r := summarize("lib", loadSpec{Concurrency: 8}, 400, run)

	want := map[string]int64{"sold": 400, "replayed": 200, "sold_out": 300, "already_purchased": 1, "timeout": 1, "unfinished": 1}
	if len(r.Outcomes) != len(want) {
		t.Errorf("outcomes = %v, want %v", r.Outcomes, want)
	}
	for k, n := range want {
		if r.Outcomes[k] != n {
			t.Errorf("outcomes[%s] = %d, want %d (all: %v)", k, r.Outcomes[k], n, r.Outcomes)
		}
	}
	if r.Sold != 400 || r.Attempts != 902 || r.Errors != 1 || r.Clients != 8 {
		t.Errorf("sold %d attempts %d errors %d clients %d, want 400, 902 (unfinished left out), 1, 8", r.Sold, r.Attempts, r.Errors, r.Clients)
	}
	if r.Seconds != 2 || r.Throughput != 451 {
		t.Errorf("%g attempts/s over %gs, want 451 over 2", r.Throughput, r.Seconds)
	}
	if r.SuccessPath == nil || r.SuccessPath.Attempts != 600 || r.SuccessPath.Seconds != 1 {
		t.Fatalf("success path = %+v, want 600 attempts in the first second", r.SuccessPath)
	}
	if r.SoldOutPhase == nil || r.SoldOutPhase.Attempts != 302 || r.SoldOutPhase.Seconds != 1 {
		t.Fatalf("sold-out phase = %+v, want 302 attempts in the last second", r.SoldOutPhase)
	}
	if r.SoldOutRatio != 302.0/600 {
		t.Errorf("sold-out ratio = %g, want %g", r.SoldOutRatio, 302.0/600)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 attempts were still in flight") {
		t.Errorf("notes = %q, want one about the unfinished attempt", r.Notes)
	}

	r.applyCheck(401, -1)
	if r.Oversold != 1 || r.SoldByTarget != 401 {
		t.Errorf("oversold %d (target holds %d), want 1 from the target's own count", r.Oversold, r.SoldByTarget)
	}
	r.setLedger(false, 3*time.Second)
	f := strings.Join(r.failures(), "\n")
	for _, w := range []string{"lib oversold 1 units", "1 attempts ended in errors", "the ledger did not equal Redis"} {
		if !strings.Contains(f, w) {
			t.Errorf("failures %q do not say %q", f, w)
		}
	}
}

func TestSummarizeWithoutSoldOut(t *testing.T) {
	start := time.Unix(1000, 0)
	run := &loadRun{start: start, stop: start.Add(time.Second),
		recs: []benchRecord{{done: 10, latency: 10, out: outOK}}, seqs: []int64{1}}
	r := summarize("http", loadSpec{}, 10, run)
	if r.SoldOutPhase != nil || r.SoldOutRatio != 0 || r.SuccessPath.Attempts != 1 {
		t.Fatalf("report = %+v, want only a success path", r)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "stock never ran out") {
		t.Errorf("notes = %q", r.Notes)
	}
}

func TestFormatting(t *testing.T) {
	for v, want := range map[float64]string{0: "-", 0.5: "0.50ms", 12.34: "12.3ms", 2500: "2.50s"} {
		if got := ms(v); got != want {
			t.Errorf("ms(%g) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{0.8123: "0.81", 31.25: "31.2", 1234.5: "1234"} {
		if got := formatRatio(v); got != want {
			t.Errorf("formatRatio(%g) = %q, want %q", v, got, want)
		}
	}
	// Outcomes print in the outcome order, whatever the map's.
	if got := formatOutcomes(map[string]int64{"error": 1, "sold": 3, "sold_out": 2}); got != "sold 3, sold_out 2, error 1" {
		t.Errorf("formatOutcomes = %q", got)
	}
	if got := formatOutcomes(nil); got != "none" {
		t.Errorf("formatOutcomes(nil) = %q", got)
	}
	caught, after := true, 0.25
	r := Report{Target: "lib", Clients: 4, Stock: 10, SKU: "bench-x", Attempts: 20, Seconds: 2, Throughput: 10,
		Latency: LatencyMS{P50: 1, P99: 2, P999: 3, Max: 4}, Outcomes: map[string]int64{"sold": 10, "sold_out": 10},
		Sold: 10, SoldByTarget: 10, LedgerEqualsRedis: &caught, LedgerEqualsRedisAfter: &after}
	var out strings.Builder
	r.print(&out)
	for _, w := range []string{"lib: 4 clients, 10 units on sale (sku bench-x)", "throughput           10/s",
		"p50 1.00ms  p99 2.00ms  p999 3.00ms  max 4.00ms", "outcomes             sold 10, sold_out 10",
		"oversold             0 (acknowledged 10, target holds 10, stock 10)", "ledger equals Redis  yes, 0.25s after the last attempt"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("report does not say %q:\n%s", w, out.String())
		}
	}
}

func TestCompareEvaluate(t *testing.T) {
	phase := func(tput, p99 float64) *PhaseReport { return &PhaseReport{Throughput: tput, P99: p99} }
	r := &CompareReport{Clients: 50, Ratios: map[string]float64{}, Results: []Report{
		{Target: rawLabel, SuccessPath: phase(10_000, 1), ScriptUsecPerCall: 15},
		{Target: rawSoldOutLabel, Throughput: 20_000, ScriptUsecPerCall: 3},
		{Target: seedLikeLabel, SuccessPath: phase(8_000, 1), ScriptUsecPerCall: 7, RedisUsecPerPurchase: 20},
		{Target: seedLikeSoldOutLabel, ScriptUsecPerCall: 2, RedisUsecPerRefusal: 5},
		{Target: "lib", SuccessPath: phase(9_000, 1.5), SoldOutRatio: 2, RedisUsecPerPurchase: 16, RedisUsecPerRefusal: 4},
		{Target: "http", SuccessPath: phase(4_000, 3), Errors: 2},
		{Target: "pg-direct", SuccessPath: phase(100, 50), Oversold: 1},
	}}
	r.evaluate()
	for name, want := range map[string]float64{"lib/raw": 0.9, "http/raw": 0.4, "lib/pg-direct": 90, "http/pg-direct": 40,
		"http_p99/raw_p99": 3, "lib_sold_out/success": 2, "raw_sold_out/success": 2} {
		if got := r.Ratios[name]; got != want {
			t.Errorf("ratio %s = %g, want %g", name, got, want)
		}
	}
	met := map[string]bool{}
	for _, g := range r.Goals {
		met[g.Name] = g.Met
	}
	for name, want := range map[string]bool{"lib throughput / seed-like script": true, "http throughput / seed-like script": true,
		"http p99 (success path), ms": true, "lib Redis CPU per purchase / seed-like": true, "lib Redis CPU per refusal / seed-like": false,
		"raw script time per call (one attempt) / seed-like": false, "raw sold-out script time per call / seed-like": true,
		"lib throughput / pg-direct": true, "http errors at 50 clients (besides contract outcomes)": false,
		"pg-direct oversold": false, "lib oversold": true} {
		if got, ok := met[name]; !ok || got != want {
			t.Errorf("goal %q met = %v (present %v), want %v", name, got, ok, want)
		}
	}
	err := r.failure()
	if err == nil || !strings.Contains(err.Error(), "pg-direct oversold 1") || !strings.Contains(err.Error(), "http: 2 attempts") {
		t.Errorf("failure = %v, want the oversell and the errors, not the missed goals", err)
	}
	var out strings.Builder
	r.print(&out)
	if !strings.Contains(out.String(), "lib throughput / seed-like script") || !strings.Contains(out.String(), "MISSED") {
		t.Errorf("compare table:\n%s", out.String())
	}
}
