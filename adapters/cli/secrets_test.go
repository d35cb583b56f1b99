package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/server"
)

// run runs the CLI with args and returns what it printed and its error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestHelpNeverPrintsSecrets sets every secret the CLI reads from the
// environment: no help text shows one, and each says where it came from.
func TestHelpNeverPrintsSecrets(t *testing.T) {
	secrets := map[string]string{
		"INVLEDGER_TOKENS":          "shop:gateway:tok-secret-0123456789",
		"INVLEDGER_DATABASE_URL":    "postgres://bob:db-secret-pw@db.internal:5432/inv",
		"INVLEDGER_REDIS_URL":       "redis://:redis-secret-pw@cache.internal:6379/0",
		"INVLEDGER_ALERT_WEBHOOK":   "https://hooks.example/services/T0/B0/hook-secret-path",
		"INVLEDGER_REDIS_CLUSTER":   "rediss://app:cluster-secret-pw@c1.internal:7000?addr=c2.internal:7000",
		"INVLEDGER_REDIS_SENTINELS": "redis://:sentinel-secret-pw@s1.internal:26379?master_name=m",
		"INVLEDGER_SEAL_KEYS":       "k1:seal-secret-0123456789abcdef0123456789",
	}
	for env, v := range secrets {
		t.Setenv(env, v)
	}
	var all strings.Builder
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"migrate", "--help"}, {"dev", "--help"},
		{"sku", "create", "--help"}, {"reconcile", "--help"}} {
		out, err := run(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, leak := range []string{"tok-secret-0123456789", "db-secret-pw", "redis-secret-pw", "hook-secret-path",
			"cluster-secret-pw", "sentinel-secret-pw", "seal-secret"} {
			if strings.Contains(out, leak) {
				t.Errorf("%v prints the secret %q:\n%s", args, leak, out)
			}
		}
		all.WriteString(out)
	}
	for _, want := range []string{"(env INVLEDGER_TOKENS, set, hidden)", `"postgres://bob:***@db.internal:5432/inv"`,
		`"redis://:***@cache.internal:6379/0"`, "(env INVLEDGER_ALERT_WEBHOOK, set, hidden)",
		"rediss://app:***@c1.internal:7000?addr=c2.internal:7000", "(env INVLEDGER_SEAL_KEYS, set, hidden)"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("no help shows %s", want)
		}
	}
}

// TestServeWithoutTokensFailsBeforeConnecting runs serve with no tokens
// against servers that do not exist: it names the missing tokens at once
// instead of trying to reach PostgreSQL first.
func TestServeWithoutTokensFailsBeforeConnecting(t *testing.T) {
	t.Parallel()
	c := Config{RedisURL: "redis://127.0.0.1:1/0", DatabaseURL: "postgres://u@127.0.0.1:1/x", LogLevel: "error"}
	c.setDefaults()
	start := time.Now()
	err := Serve(context.Background(), c, ServeSettings{Durability: app.DurabilityStrict, Config: server.Config{Listen: "127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), "INVLEDGER_TOKENS") || strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("err = %v, want the missing tokens named, and nothing about PostgreSQL", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("failing took %v", took)
	}
}

// TestVersion prints the version, the one go_build_info reports.
func TestVersion(t *testing.T) {
	out, err := run(t, "--version")
	if err != nil || !strings.HasPrefix(out, "invledger version "+app.Version()+" (") {
		t.Fatalf("--version: %v %q", err, out)
	}
	mfs, err := app.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "go_build_info" {
			continue
		}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			if l.GetName() == "version" && l.GetValue() == app.Version() {
				return
			}
		}
		t.Fatalf("go_build_info labels %v lack version %q", mf.GetMetric()[0].GetLabel(), app.Version())
	}
	t.Fatal("no go_build_info")
}
