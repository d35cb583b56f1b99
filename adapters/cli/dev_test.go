package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// runDev runs `invledger dev` on dir until its banner is out, stops it,
// and returns the banner.
func runDev(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out localstacktest.SyncBuffer
	cmd := NewRootCmd()
	cmd.SetArgs([]string{"dev", "--dir", dir, "--listen", "127.0.0.1:0", "--durability", "everysec", "--log-level", "error"})
	cmd.SetOut(&out)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.After(90 * time.Second)
	for !strings.Contains(out.String(), "INVLEDGER_DATABASE_URL=") {
		select {
		case err := <-done:
			t.Fatalf("dev ended before its banner: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("no banner after 90s:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev after cancel: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop within 60s")
	}
	return out.String()
}

// TestDevPrintsExportsAndKeepsItsPorts: dev prints the lines to paste
// (API OP GW AU AP, the CLI's URLs, the seal key it keeps and its API token, the
// PHP client's URL and token), writes them to --dir/env, and a
// restart serves Redis and PostgreSQL on the same ports, so they stay
// valid (issue 17, F4 and F5).
func TestDevPrintsExportsAndKeepsItsPorts(t *testing.T) {
	t.Parallel()
	dir := localstacktest.ServerDir(t)
	banner := runDev(t, dir)
	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(env)), "\n")
	if len(lines) != 3 || !strings.Contains(banner, string(env)) {
		t.Fatalf("env file %q is not the three export lines of the banner:\n%s", env, banner)
	}
	if !regexp.MustCompile(`(?m)^  console +http://127\.0\.0\.1:\d+/console `).MatchString(banner) {
		t.Errorf("the banner has no console URL:\n%s", banner)
	}
	tokens, err := os.ReadFile(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range strings.Fields(string(tokens)) {
		f := strings.SplitN(tok, ":", 3)
		v := map[string]string{"operator": "OP", "gateway": "GW", "auditor": "AU", "approver": "AP"}[f[1]]
		if !strings.Contains(lines[0], " "+v+"="+f[2]) {
			t.Errorf("%s's secret is not exported as %s: %s", f[1], v, lines[0])
		}
		// The CLI's token is the operator's, the PHP client's the gateway's.
		if v := map[string]string{"operator": "INVLEDGER_API_TOKEN", "gateway": "INVLEDGER_TOKEN"}[f[1]]; v != "" && !strings.Contains(lines[2], " "+v+"="+f[2]) {
			t.Errorf("%s's secret is not exported as %s: %s", f[1], v, lines[2])
		}
	}
	for _, want := range []string{"export API=http://127.0.0.1:", "INVLEDGER_API_URL=http://127.0.0.1:", "INVLEDGER_REDIS_URL='redis://127.0.0.1:",
		"INVLEDGER_DATABASE_URL='postgres://", "INVLEDGER_SEAL_KEYS='dev:", " INVLEDGER_URL=http://127.0.0.1:"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	again := runDev(t, dir)
	env2, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	// The API listens on :0 here, so only the store URLs and the seal key
	// are compared.
	if a, b := strings.Fields(lines[1])[2:], strings.Fields(strings.Split(string(env2), "\n")[1])[2:]; strings.Join(a, " ") != strings.Join(b, " ") {
		t.Fatalf("a restart moved the servers or changed the seal key:\nbefore %s\nafter  %s\n%s", a, b, again)
	}
}
