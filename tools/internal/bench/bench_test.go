package bench

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestConfigNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"concurrency", func(c *Config) { c.Concurrency = -1 }, []string{"--concurrency"}},
		{"duration", func(c *Config) { c.Duration = time.Hour }, []string{"--duration"}},
		{"shares", func(c *Config) { c.RetryShare, c.RepeatShare = 0.6, 0.6 }, []string{"--retry-share plus --repeat-share"}},
		{"target", func(c *Config) { c.Target = "redis" }, []string{"--target"}},
		{"http needs url and tokens", func(c *Config) { c.Target = "http" }, []string{"--url", "--token", "--operator-token"}},
		{"http remote", func(c *Config) {
			c.Target, c.URL, c.Token, c.OperatorToken = "http", "http://203.0.113.9:8080", "g", "o"
		}, []string{"--allow-remote"}},
		{"compare targets", func(c *Config) { c.Compare, c.Targets = true, []string{"lib", "mysql"} }, []string{"--targets"}},
		{"every error at once", func(c *Config) { c.Users, c.Stock = -5, -1 }, []string{"--users", "--stock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			c.setDefaults()
			tc.mod(&c)
			err := c.Validate()
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to name %s", err, w)
				}
			}
		})
	}
	var ok Config
	ok.setDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
}

func TestBenchTrafficMix(t *testing.T) {
	const skus = 10
	tr := &traffic{spec: loadSpec{Requests: 10_000, Users: 100_000, SKUs: skus, RetryShare: 0.2, RepeatShare: 0.1}}
	rng := rand.New(rand.NewPCG(1, 2))
	type sent struct {
		user string
		sku  int
	}
	requests := map[string]sent{}
	users := map[string]int{}
	var perSKU [skus]int
	var n, retries int
	for {
		user, req, sku, ok := tr.next(rng, nil)
		if !ok {
			break
		}
		n++
		if prev, seen := requests[req]; seen {
			retries++
			if prev != (sent{user, sku}) {
				t.Fatalf("request %s resent for user %s on SKU %d, first sent for %+v", req, user, sku, prev)
			}
		}
		requests[req] = sent{user, sku}
		users[user]++
		perSKU[sku]++
	}
	for i, c := range perSKU {
		if c < 800 || c > 1200 {
			t.Errorf("SKU %d got %d of 10000 attempts, want about a tenth: %v", i, c, perSKU)
		}
	}
	if n != 10_000 {
		t.Fatalf("handed out %d attempts, want exactly --requests", n)
	}
	if retries < 1500 || retries > 2500 {
		t.Errorf("%d retries in 10000 attempts, want about 20%%", retries)
	}
	repeats := n - retries - len(users)
	if repeats < 500 || repeats > 1500 {
		t.Errorf("%d second purchases, want about 10%%", repeats)
	}
}

func TestParseRedisBenchmark(t *testing.T) {
	out := "\rEVALSHA abc: rps=0.0 (overall: 0.0) avg_msec=-nan (overall: -nan)\r" + `
  20000 requests completed in 0.52 seconds
  50 parallel clients

Latency by percentile distribution:
0.000% <= 0.191 milliseconds (cumulative count 3)
50.000% <= 0.599 milliseconds (cumulative count 10006)
99.805% <= 6.999 milliseconds (cumulative count 19961)
99.902% <= 7.247 milliseconds (cumulative count 19981)
99.951% <= 7.407 milliseconds (cumulative count 19991)
100.000% <= 7.543 milliseconds (cumulative count 20000)

Cumulative distribution of latencies:
0.000% <= 0.103 milliseconds (cumulative count 0)
99.950% <= 7.407 milliseconds (cumulative count 19990)

Summary:
  throughput summary: 38461.54 requests per second
  latency summary (msec):
          avg       min       p50       p95       p99       max
        0.491     0.096     0.367     1.047     1.279     7.543
`
	r, err := parseRedisBenchmark(out)
	if err != nil {
		t.Fatal(err)
	}
	want := rawResult{requests: 20000, seconds: 0.52, rps: 38461.54, p50: 0.367, p99: 1.279, p999: 7.247, maxL: 7.543}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	if _, err := parseRedisBenchmark("ERR unknown command"); err == nil {
		t.Fatal("garbage parsed")
	}
}

// TestHTTPCallsInFlight reads the gauge of calls in flight from a serve's
// /metrics, summed over its series, and tells a serve without it.
func TestHTTPCallsInFlight(t *testing.T) {
	t.Parallel()
	var metrics atomic.Value
	metrics.Store("# TYPE invledger_purchase_batches_in_flight gauge\n" +
		"invledger_purchase_batches_in_flight{partition=\"1\"} 2\ninvledger_purchase_batches_in_flight{partition=\"7\"} 1.5\n" +
		"invledger_purchase_batches_in_flight_total 9\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, metrics.Load().(string)) }))
	defer srv.Close()
	tg := newHTTPTarget(srv.URL, "g", "o", 1, time.Second)
	defer tg.close()
	if calls, ok, err := tg.callsInFlight(context.Background()); calls != 3.5 || !ok || err != nil {
		t.Errorf("calls in flight %g %v %v, want 3.5 from both series", calls, ok, err)
	}
	metrics.Store("invledger_purchase_batch_size_count 3\n")
	if _, ok, err := tg.callsInFlight(context.Background()); ok || err != nil {
		t.Errorf("a serve without the gauge: ok %v err %v", ok, err)
	}
}

func TestRawBenchmarkArgs(t *testing.T) {
	t.Parallel()
	call := []string{"evalsha", "abc", "2", "sku-key", "stream", "sku", "d", "probe-user", "1", "probe-req", "ev-1", ""}
	got, err := rawBenchmarkArgs(call, "probe-user", "probe-req", "ev-1", "stream", "stream:bench-raw")
	want := []string{"EVALSHA", "abc", "2", "sku-key", "stream:bench-raw", "sku", "d", "u__rand_int__", "1", "r__rand_int__",
		"0190b5a4-7a52-7c3e-9d1b-__rand_int__", ""}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	if _, err := rawBenchmarkArgs(append(call, "probe-user"), "probe-user", "probe-req", "ev-1", "stream", "x"); err == nil ||
		!strings.Contains(err.Error(), "rawBenchmarkArgs") {
		t.Fatalf("a user sent twice: err %v, want one naming the function to update", err)
	}
}
