package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// issueMetrics are the metrics issue 5 asks /metrics to expose.
var issueMetrics = []string{
	"invledger_deduction_duration_seconds",            // deduction latency, by outcome
	"invledger_inventory_operations_total",            // outcomes
	"invledger_redis_script_errors_total",             // Redis script errors
	"invledger_fenced_skus",                           // fence state
	"invledger_projection_oldest_unacked_age_seconds", // projection lag
	"invledger_projection_pending_entries",            // pending entries
	"invledger_reconcile_findings_total",              // reconciliation findings, by class
	"invledger_adjustments_pending",                   // pending adjustments
	"go_build_info",                                   // build info
}

// TestMetricsPassPromtoolAndCoverTheIssue runs serve, makes every labeled
// series exist (a purchase and a refusal, a script error, a reconciliation
// with a finding), and checks /metrics with `promtool check metrics`, the
// Prometheus project's own linter.
func TestMetricsPassPromtoolAndCoverTheIssue(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: run scripts/install-deps.sh, which installs Debian's prometheus package")
	}
	s := stacktest.New(t)
	ctx := context.Background()
	cfg := Config{RedisURL: "redis://" + s.Redis.Addr(), DatabaseURL: s.DatabaseURL, LogLevel: "error"}
	cfg.setDefaults()
	const op, gw = "operator-secret-0001", "gateway-secret-00001"
	ready, done := make(chan string, 1), make(chan error, 1)
	ss := ServeSettings{Durability: app.DurabilityStrict, Config: server.Config{Listen: "127.0.0.1:0",
		Tokens: "ops:operator:" + op + ",shop:gateway:" + gw, Subscribers: 1, CommitSize: 100, ReconcileInterval: time.Hour, DataDir: t.TempDir(),
		OnListening: func(addr string) { ready <- addr }}}
	serveCtx, stop := context.WithCancel(ctx)
	go func() { done <- Serve(serveCtx, cfg, ss) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30s")
		}
	})
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening")
	}
	call := func(method, path, token, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
	}

	call("PUT", "/v1/skus/met-1", op, `{"stock":5,"per_user_limit":1}`, 201)
	call("POST", "/v1/skus/met-1/warm", op, "", 200)
	call("POST", "/v1/skus/met-1/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r1"}`, 200)
	call("POST", "/v1/skus/met-1/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r2"}`, 409)
	// A script error: a key of the wrong type makes the script fail inside
	// Redis, which is neither a purchase nor a refusal: a 503 while the
	// SKU is restored from the ledger, counted as a script error.
	broken := s.Keyspace.SKUKey("met-broken")
	if err := s.RedisClient.Set(ctx, broken, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	call("POST", "/v1/skus/met-broken/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r3"}`, 503)
	if err := s.RedisClient.Del(ctx, broken).Err(); err != nil {
		t.Fatal(err)
	}
	// A finding: Redis holds more stock than the ledger says.
	s.WaitProjected(t, "met-1", 20*time.Second)
	if err := s.RedisClient.HIncrBy(ctx, s.Keyspace.SKUKey("met-1"), "stock", 3).Err(); err != nil {
		t.Fatal(err)
	}
	call("POST", "/v1/reconcile", op, `{"sku":"met-1"}`, 200)

	// The janitor publishes the projection's lag every 10 s, so the first
	// scrapes may come before its first pass over the consumer group.
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		body = scrape(t, api+"/metrics")
		missing := missingMetrics(body, issueMetrics)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %v", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The labeled series of what the test did. Counts are at least 1: the
	// reconciler's own start-up run may see the drift too.
	for _, series := range []string{
		`invledger_deduction_duration_seconds_bucket{outcome="ok",le="+Inf"}`,
		`invledger_inventory_operations_total{operation="deduct",outcome="already_purchased"}`,
		`invledger_redis_script_errors_total{operation="deduct"}`,
		`invledger_reconcile_findings_total{class="redis_high"}`,
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` [1-9]`).Match(body) {
			t.Errorf("/metrics lacks the series %s with a count of 1 or more", series)
		}
	}

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return b
}

// missingMetrics returns the names that have no sample in the exposition
// body; a # HELP line alone does not count.
func missingMetrics(body []byte, names []string) []string {
	var missing []string
	for _, name := range names {
		sample := regexp.MustCompile(fmt.Sprintf(`(?m)^%s(_bucket|_sum|_count)?(\{.*\})? `, regexp.QuoteMeta(name)))
		if !sample.Match(body) {
			missing = append(missing, name)
		}
	}
	return missing
}
