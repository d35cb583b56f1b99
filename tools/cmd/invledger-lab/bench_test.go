package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/tools/internal/bench"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

// TestBenchCompareNeverOversells runs a tiny --compare on a private stack:
// every target sells exactly its stock, every attempt has one outcome, and
// the ledger catches up with Redis.
func TestBenchCompareNeverOversells(t *testing.T) {
	t.Parallel()
	targets := []string{"lib", "http", "pg-direct"}
	if _, err := exec.LookPath("redis-benchmark"); err == nil {
		targets = append([]string{"raw"}, targets...)
	} else {
		t.Log("redis-benchmark not installed: the raw ceiling is not exercised")
	}
	bc := bench.Config{Compare: true, Targets: targets, Dir: localstacktest.ServerDir(t), Concurrency: 16, Requests: 600, Stock: 200,
		Duration: 10 * time.Second, Users: 1000, RetryShare: 0.2, RepeatShare: 0.1, JSON: true, Projector: true}
	start := time.Now()
	var out bytes.Buffer
	err := bench.Run(context.Background(), bc, benchDeps(nil), &out, io.Discard)
	t.Logf("compare took %s", time.Since(start))
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.CompareReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json: %v", err)
	}
	for _, r := range rep.Results {
		if r.Oversold != 0 {
			t.Errorf("%s oversold %d", r.Target, r.Oversold)
		}
		if r.Target == "raw" || r.Target == "raw-sold-out" || r.Target == "seed-like" || r.Target == "seed-like-sold-out" {
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
	if raw := rep.Result("raw"); raw != nil && raw.Sold != 600 {
		t.Errorf("raw ceiling deducted %d of 600 calls", raw.Sold)
	}
	for _, name := range []string{"raw", "seed-like"} {
		if r := rep.Result(name); r != nil && (r.ScriptUsecPerCall <= 0 || r.AOFBytesPerCall <= 0) {
			t.Errorf("%s: usec_per_call %.2f, AOF bytes per call %.0f: Redis's view of the script is missing", name, r.ScriptUsecPerCall, r.AOFBytesPerCall)
		}
	}
	if _, ok := rep.Ratios["raw/seed-like"]; rep.Result("raw") != nil && !ok {
		t.Errorf("no raw/seed-like ratio: %v", rep.Ratios)
	}
	if _, ok := rep.Ratios["lib/pg-direct"]; !ok {
		t.Errorf("no lib/pg-direct ratio: %v", rep.Ratios)
	}
}

// TestCompareRunsTheServiceWithTheCommandLinesSettings: the library
// --compare wires over its private stack has the settings of the command
// line (here --partitions 4: every SKU's keys are in one of four
// partitions), where it used to have the defaults whatever was given.
func TestCompareRunsTheServiceWithTheCommandLinesSettings(t *testing.T) {
	t.Parallel()
	var config func() (cli.Config, error)
	cmd := cli.NewRootCmd(func(c func() (cli.Config, error)) *cobra.Command {
		config = c
		return &cobra.Command{Use: "bench", RunE: func(*cobra.Command, []string) error { return nil }}
	})
	cmd.SetArgs([]string{"bench", "--partitions", "4"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv, stop, err := benchDeps(config).StartStack(ctx, bench.StackOptions{Dir: localstacktest.ServerDir(t), Durability: "everysec"})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	site, err := srv.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	tag := regexp.MustCompile(`\{p(\d+)\}`)
	for i := range 64 {
		key := site.Keys.SKUKey("sku-" + strconv.Itoa(i))
		m := tag.FindStringSubmatch(key)
		if m == nil {
			t.Fatalf("key %q names no partition", key)
		}
		if p, _ := strconv.Atoi(m[1]); p >= 4 {
			t.Fatalf("key %q is in partition %d: the library has not --partitions 4", key, p)
		}
	}
}

// TestBenchCommandSingleTargets runs `invledger-lab bench` as a user would, for
// lib and pg-direct, and reads its --json report.
func TestBenchCommandSingleTargets(t *testing.T) {
	t.Parallel()
	redisURL := localstacktest.Redis(t).URL()
	dbURL := localstacktest.Postgres(t)
	if err := app.Migrate(context.Background(), dbURL, cli.Config{LogLevel: "error", LogFormat: "text"}.Logger()); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"lib", "pg-direct"} {
		t.Run(target, func(t *testing.T) {
			var out bytes.Buffer
			cmd := cli.NewRootCmd(newBenchCmd)
			cmd.SetArgs([]string{"bench", "--target", target, "--redis-url", redisURL, "--database-url", dbURL, "--log-level", "error",
				"--concurrency", "8", "--requests", "400", "--stock", "100", "--users", "300", "--json"})
			cmd.SetOut(&out)
			cmd.SetErr(io.Discard)
			if err := cmd.ExecuteContext(context.Background()); err != nil {
				t.Fatalf("bench: %v\n%s", err, out.String())
			}
			var rep bench.Report
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

// TestBenchHelpNeverPrintsItsTokens sets both tokens bench reads from the
// environment: its help says they are set and shows neither.
func TestBenchHelpNeverPrintsItsTokens(t *testing.T) {
	t.Setenv("INVLEDGER_BENCH_TOKEN", "bench-secret-gateway")
	t.Setenv("INVLEDGER_BENCH_OPERATOR_TOKEN", "bench-secret-operator")
	var out bytes.Buffer
	cmd := cli.NewRootCmd(newBenchCmd)
	cmd.SetArgs([]string{"bench", "--help"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"bench-secret-gateway", "bench-secret-operator"} {
		if strings.Contains(out.String(), leak) {
			t.Errorf("bench --help prints the secret %q:\n%s", leak, out.String())
		}
	}
	for _, want := range []string{"(env INVLEDGER_BENCH_TOKEN, set, hidden)", "(env INVLEDGER_BENCH_OPERATOR_TOKEN, set, hidden)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench --help does not show %s:\n%s", want, out.String())
		}
	}
}

// TestTheShippedBinarySaysWhereBenchWent: invledger bench, with any of the
// old command lines, answers where the load generator is, and exits non-zero.
func TestTheShippedBinarySaysWhereBenchWent(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "--compare", "--concurrency", "50"}} {
		var out bytes.Buffer
		cmd := cli.NewRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		if err == nil || !strings.Contains(err.Error(), "make bench") {
			t.Errorf("%v: %v, want an error that says to run make bench", args, err)
		}
	}
}
