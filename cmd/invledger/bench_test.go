package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/localstack/localstacktest"
)

// TestBenchCompareNeverOversells runs a tiny --compare on a private stack:
// every target sells exactly its stock, every attempt has one outcome, and
// the ledger catches up with Redis.
func TestBenchCompareNeverOversells(t *testing.T) {
	targets := []string{"lib", "http", "pg-direct"}
	if _, err := exec.LookPath("redis-benchmark"); err == nil {
		targets = append([]string{"raw"}, targets...)
	} else {
		t.Log("redis-benchmark not installed: the raw ceiling is not exercised")
	}
	bc := BenchConfig{Compare: true, Targets: targets, Dir: stackDir(t), Concurrency: 16, Requests: 600, Stock: 200,
		Duration: 10 * time.Second, Users: 1000, RetryShare: 0.2, RepeatShare: 0.1}
	bc.setDefaults()
	if err := bc.Validate(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := runCompare(context.Background(), bc, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compare took %s", time.Since(start))
	var out strings.Builder
	rep.print(&out)
	t.Log(out.String())
	if err := rep.failure(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Oversold != 0 {
			t.Errorf("%s oversold %d", r.Target, r.Oversold)
		}
		if r.Target == rawLabel || r.Target == rawSoldOutLabel {
			if r.Attempts != 600 {
				t.Errorf("%s made %d calls, want 600", r.Target, r.Attempts)
			}
			continue
		}
		var sum int64
		for _, n := range r.Outcomes {
			sum += n
		}
		if sum != r.Attempts || r.Attempts != 600 {
			t.Errorf("%s: outcomes %v add up to %d, attempts %d, want 600", r.Target, r.Outcomes, sum, r.Attempts)
		}
		if r.Sold != 200 || r.SoldByTarget != 200 {
			t.Errorf("%s sold %d (target holds %d), want the whole stock of 200", r.Target, r.Sold, r.SoldByTarget)
		}
		if r.Errors != 0 {
			t.Errorf("%s: %d errors: %v", r.Target, r.Errors, r.ErrorSamples)
		}
		if r.Outcomes["sold_out"] == 0 || r.SoldOutPhase == nil {
			t.Errorf("%s: no sold-out phase: %v", r.Target, r.Outcomes)
		}
		if r.Target != "pg-direct" && (r.LedgerEqualsRedis == nil || !*r.LedgerEqualsRedis) {
			t.Errorf("%s: the ledger did not catch up with Redis", r.Target)
		}
	}
	if raw := rep.result(rawLabel); raw != nil && raw.Sold != 600 {
		t.Errorf("raw ceiling deducted %d of 600 calls", raw.Sold)
	}
	if _, ok := rep.Ratios["lib/pg-direct"]; !ok {
		t.Errorf("no lib/pg-direct ratio: %v", rep.Ratios)
	}
}

func TestBenchConfigNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*BenchConfig)
		want []string
	}{
		{"concurrency", func(c *BenchConfig) { c.Concurrency = -1 }, []string{"--concurrency"}},
		{"duration", func(c *BenchConfig) { c.Duration = time.Hour }, []string{"--duration"}},
		{"shares", func(c *BenchConfig) { c.RetryShare, c.RepeatShare = 0.6, 0.6 }, []string{"--retry-share plus --repeat-share"}},
		{"target", func(c *BenchConfig) { c.Target = "redis" }, []string{"--target"}},
		{"http needs url and tokens", func(c *BenchConfig) { c.Target = "http" }, []string{"--url", "--token", "--operator-token"}},
		{"http remote", func(c *BenchConfig) {
			c.Target, c.URL, c.Token, c.OperatorToken = "http", "http://203.0.113.9:8080", "g", "o"
		}, []string{"--allow-remote"}},
		{"compare targets", func(c *BenchConfig) { c.Compare, c.Targets = true, []string{"lib", "mysql"} }, []string{"--targets"}},
		{"every error at once", func(c *BenchConfig) { c.Users, c.Stock = -5, -1 }, []string{"--users", "--stock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c BenchConfig
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
	var ok BenchConfig
	ok.setDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults are invalid: %v", err)
	}
}

func TestBenchTrafficMix(t *testing.T) {
	tr := &traffic{spec: loadSpec{Requests: 10_000, Users: 100_000, RetryShare: 0.2, RepeatShare: 0.1}}
	rng := rand.New(rand.NewPCG(1, 2))
	requests := map[string]string{}
	users := map[string]int{}
	var n, retries int
	for {
		user, req, ok := tr.next(rng, nil)
		if !ok {
			break
		}
		n++
		if prev, seen := requests[req]; seen {
			retries++
			if prev != user {
				t.Fatalf("request %s resent for user %s, first sent for %s", req, user, prev)
			}
		}
		requests[req] = user
		users[user]++
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

// TestBenchCommandSingleTargets runs `invledger bench` as a user would, for
// lib and pg-direct, and reads its --json report.
func TestBenchCommandSingleTargets(t *testing.T) {
	redisURL := localstacktest.Redis(t).URL()
	dbURL := localstacktest.Postgres(t)
	if err := migrate(context.Background(), dbURL, quietLogger()); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"lib", "pg-direct"} {
		t.Run(target, func(t *testing.T) {
			var out bytes.Buffer
			cmd := newRootCmd()
			cmd.SetArgs([]string{"bench", "--target", target, "--redis-url", redisURL, "--database-url", dbURL, "--log-level", "error",
				"--concurrency", "8", "--requests", "400", "--stock", "100", "--users", "300", "--json"})
			cmd.SetOut(&out)
			cmd.SetErr(io.Discard)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("bench: %v\n%s", err, out.String())
			}
			var rep BenchReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("--json: %v\n%s", err, out.String())
			}
			var sum int64
			for _, n := range rep.Outcomes {
				sum += n
			}
			if rep.Oversold != 0 || rep.Sold != 100 || rep.SoldByTarget != 100 || sum != 400 || rep.Attempts != 400 || rep.Errors != 0 {
				t.Fatalf("report: %+v", rep)
			}
			if target == "lib" && (rep.LedgerEqualsRedis == nil || !*rep.LedgerEqualsRedis) {
				t.Fatalf("the ledger did not catch up: %+v", rep)
			}
		})
	}
}
