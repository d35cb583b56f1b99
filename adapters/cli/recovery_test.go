package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
)

// runCLI runs invledger with args against the stack and returns stdout,
// stderr and the error.
func runCLI(t *testing.T, s *stacktest.Stack, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewRootCmd()
	cmd.SetArgs(append(args, "--redis-url", "redis://"+s.Redis.Addr(), "--database-url", s.DatabaseURL, "--log-level", "error"))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestRecoveryCommands(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "cli-1", 20, 1)
	s.SKU(t, "cli-2", 5, 1)
	for _, u := range []string{"ann", "bob", "cy"} {
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("cli-1", u, 1, "r-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand("cli-1", "bob", "r-bob", "")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	buyers := s.Counts(t, "cli-1")

	// restore-redis --all after a wipe.
	if _, _, err := runCLI(t, s, "restore-redis"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "[sku all]") {
		t.Fatalf("restore-redis without a target: %v", err)
	}
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, s, "restore-redis", "--all")
	if err != nil {
		t.Fatalf("restore-redis --all: %v\n%s", err, stderr)
	}
	var report output.RestoreReportJSON
	if err := json.Unmarshal([]byte(out), &report); err != nil || report.SKUs != 2 || report.Rows != 6 {
		t.Fatalf("report %s (%v), want 2 skus and 6 rows", out, err)
	}
	if !strings.Contains(stderr, "restore-redis: 2/2 skus, 6 ledger rows") {
		t.Fatalf("no final progress line on stderr: %q", stderr)
	}
	if after := s.Counts(t, "cli-1"); !maps.Equal(after, buyers) {
		t.Fatalf("buyers after restore %v, want %v", after, buyers)
	}
	v, err := s.Service.State(ctx, "cli-1")
	if err != nil || *v.RedisStock != 18 || *v.RedisSeq != 5 || v.Status != "open" {
		t.Fatalf("cli-1 after restore: %+v %v, want open at stock 18 seq 5", v, err)
	}
	out, _, err = runCLI(t, s, "restore-redis", "--sku", "cli-2")
	if err != nil || !strings.Contains(out, `"restored": true`) {
		t.Fatalf("restore-redis --sku: %s %v", out, err)
	}

	// rebuild-projections repairs a tampered row.
	if _, err := s.Pool.Exec(ctx, `UPDATE balances SET balance = balance + 7 WHERE sku = 'cli-1'`); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, s, "rebuild-projections")
	var rebuilt output.RebuildReportJSON
	if err != nil || json.Unmarshal([]byte(out), &rebuilt) != nil || rebuilt.SKUs != 2 || len(rebuilt.Corrected) != 1 || rebuilt.Corrected[0] != "cli-1" {
		t.Fatalf("rebuild-projections: %s %v", out, err)
	}
	var balance int64
	if err := s.Pool.QueryRow(ctx, `SELECT balance FROM balances WHERE sku = 'cli-1'`).Scan(&balance); err != nil || balance != 18 {
		t.Fatalf("balance after rebuild %d %v, want 18", balance, err)
	}

	// archive-buyers refuses an open sale; sku close, then it archives.
	_, _, err = runCLI(t, s, "archive-buyers", "--sku", "cli-1")
	if !errors.Is(err, ledger.ErrSKUOpen) || exitCode(err) != 2 || !strings.Contains(err.Error(), "invledger sku close cli-1") {
		t.Fatalf("archive-buyers of an open sale: %v (exit %d)", err, exitCode(err))
	}
	out, _, err = runCLI(t, s, "sku", "close", "cli-1")
	if err != nil || !strings.Contains(out, `"already_closed": false`) {
		t.Fatalf("sku close: %s %v", out, err)
	}
	s.ProjectStreams(t) // the closed event
	out, _, err = runCLI(t, s, "archive-buyers", "--sku", "cli-1")
	var archived output.ArchiveResultJSON
	if err != nil || json.Unmarshal([]byte(out), &archived) != nil || archived.Buyers != 2 || archived.Units != 2 {
		t.Fatalf("archive-buyers: %s %v, want 2 buyers holding 2 units", out, err)
	}
	if n := len(s.Counts(t, "cli-1")); n != 0 {
		t.Fatalf("%d buyers survived archive-buyers", n)
	}
	out, _, err = runCLI(t, s, "archive-buyers", "--closed-for", "0s")
	if err != nil || !strings.Contains(out, `"archived": []`) {
		t.Fatalf("archive-buyers --closed-for with nothing left: %s %v", out, err)
	}

	for _, args := range [][]string{{"restore-redis"}, {"rebuild-projections"}, {"archive-buyers"}, {"sku", "close"}} {
		out, _, err := runCLI(t, s, append(args, "--help")...)
		if err != nil || !strings.Contains(out, "Usage:") || len(out) < 300 {
			t.Fatalf("%v --help: %v\n%s", args, err, out)
		}
	}
}

// TestSQLOnlyCommandsWorkWithRedisDown stops Redis: the commands an operator
// needs after losing it (audit queries, the chain check, rebuilding the
// balances, dead letters) read only PostgreSQL and still work, while a command that needs
// Redis says so and exits as transient.
func TestSQLOnlyCommandsWorkWithRedisDown(t *testing.T) {
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "down-1", 5, 1)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("down-1", "ann", 1, "r-ann")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Redis.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"audit", "history", "down-1"},
		{"audit", "buyers", "down-1"},
		{"audit", "user", "ann"},
		{"audit", "verify", "--sku", "down-1"},
		{"rebuild-projections"},
		{"audit", "operations", "down-1"},
		{"dead-letters", "list"},
	} {
		if out, stderr, err := runCLI(t, s, args...); err != nil {
			t.Errorf("%v with Redis down: %v\n%s%s", args, err, out, stderr)
		}
	}
	_, _, err := runCLI(t, s, "sku", "show", "down-1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis") || exitCode(err) != 4 {
		t.Fatalf("sku show with Redis down: %v (exit %d), want cannot reach Redis, exit 4", err, exitCode(err))
	}
}
