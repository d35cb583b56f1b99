package cli

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/seal"
)

// TestAuditVerifySaysWhatItChecked: on an unkeyed ledger, verify passes
// but says the chain resists no database superuser; on a keyed one it
// names the algorithm, the key ids, the rows of each and the checkpoint,
// fails (exit 1, saying what to give it) without a key, calls the seals
// broken (exit 3) with another key unless their key is declared retired,
// and exits 3 naming the seq of a row edited and re-sealed.
func TestAuditVerifySaysWhatItChecked(t *testing.T) {
	t.Parallel()
	const key = "cli-k:0123456789abcdef0123456789abcdef"
	ctx := context.Background()
	unkeyed := stacktest.New(t)
	keyed := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.SealKeys = key }))
	for _, s := range []*stacktest.Stack{unkeyed, keyed} {
		s.SKU(t, "v-1", 5, 1)
		for i := range 3 {
			u := fmt.Sprint("u", i)
			if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("v-1", u, 1, u)); err != nil {
				t.Fatal(err)
			}
		}
		s.ProjectStreams(t)
	}
	if _, ok, err := keyed.App.Sealer.Checkpoint(ctx); err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}

	out, _, err := runCLI(t, unkeyed, "audit", "verify")
	if err != nil || !strings.Contains(out, "unkeyed (sha256): 4 rows") || !strings.Contains(out, "UNKEYED: sha256 seals do not resist a database superuser") {
		t.Fatalf("unkeyed ledger: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, keyed, "audit", "verify", "--seal-keys", key)
	if err != nil || !strings.Contains(out, "keyed (hmac-sha256): 4 rows (key cli-k: 4); unkeyed (sha256): 0 rows") ||
		!strings.Contains(out, "checkpoints: 1 verified") || strings.Contains(out, "UNKEYED") {
		t.Fatalf("keyed ledger with its key: %v\n%s", err, out)
	}
	since := regexp.MustCompile(`keep --since-checkpoint (1:[0-9a-f]{16}) outside the database`).FindStringSubmatch(out)
	if since == nil {
		t.Fatalf("verify does not print the checkpoint to keep:\n%s", out)
	}
	if out, _, err := runCLI(t, keyed, "audit", "verify", "--seal-keys", key, "--since-checkpoint", since[1]); err != nil {
		t.Fatalf("--since-checkpoint %s: %v\n%s", since[1], err, out)
	}
	if _, _, err := runCLI(t, keyed, "audit", "verify", "--seal-keys", key, "--since-checkpoint", "1:xyz"); exitCode(err) != exitBadInput ||
		!strings.Contains(err.Error(), "--since-checkpoint") {
		t.Fatalf("--since-checkpoint 1:xyz: exit %d %v", exitCode(err), err)
	}
	out, _, err = runCLI(t, keyed, "audit", "verify", "--seal-keys", "")
	if exitCode(err) != exitInternal || !strings.Contains(err.Error(), `key id "cli-k"`) || !strings.Contains(err.Error(), "INVLEDGER_SEAL_KEYS") ||
		!strings.Contains(out, "NOT CHECKED") {
		t.Errorf("keyed ledger, no key: exit %d %v\n%s", exitCode(err), err, out)
	}
	const other = "other:fedcba9876543210fedcba9876543210"
	out, stderr, err := runCLI(t, keyed, "audit", "verify", "--seal-keys", other)
	if exitCode(err) != exitDrift || !strings.Contains(out, `v-1: first broken at seq 1: corrupt ledger: sku v-1 seq 1 is keyed with key id "cli-k", which is neither`) ||
		!strings.Contains(stderr, "--retired-seal-keys") || strings.Contains(out, "keep --since-checkpoint") {
		t.Errorf("keyed ledger, another key: exit %d %v\n%s%s", exitCode(err), err, out, stderr)
	}
	out, _, err = runCLI(t, keyed, "audit", "verify", "--seal-keys", other, "--retired-seal-keys", "cli-k")
	if err != nil || !strings.Contains(out, "not checked, retired key cli-k: 4 rows") || !strings.Contains(out, "no reference to keep") {
		t.Errorf("keyed ledger, cli-k retired: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, keyed, "audit", "verify", "--seal-keys", key, "--retired-seal-keys", "cli-k"); exitCode(err) != exitBadInput ||
		!strings.Contains(err.Error(), "--retired-seal-keys") {
		t.Errorf("cli-k given and retired: exit %d %v", exitCode(err), err)
	}
	stacktest.Superuser(t, keyed.Pool, `UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'v-1' AND seq = 3`)
	stacktest.Reseal(t, keyed.Pool, "v-1", 3)
	out, _, err = runCLI(t, keyed, "audit", "verify", "--seal-keys", key)
	if exitCode(err) != exitDrift || !strings.Contains(out, "v-1: first broken at seq 3") {
		t.Fatalf("re-sealed: exit %d %v\n%s", exitCode(err), err, out)
	}
}

// TestServeRefusesAKeyedLedgerWithoutAKey: once the ledger holds a keyed
// checkpoint, serve with the projector (which seals) refuses to start
// without a seal key, saying which setting to give, rather than append
// seals anyone could forge.
func TestServeRefusesAKeyedLedgerWithoutAKey(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.SealKeys = "k1:0123456789abcdef0123456789abcdef" }))
	s.SKU(t, "kept", 5, 1)
	s.ProjectStreams(t)
	if _, ok, err := s.App.Sealer.Checkpoint(context.Background()); err != nil || !ok {
		t.Fatalf("checkpoint: %v %v", ok, err)
	}
	c := Config{RedisURL: s.Redis.URL(), DatabaseURL: s.DatabaseURL, LogLevel: "error"}
	c.setDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Serve(ctx, c, ServeSettings{Durability: app.DurabilityStrict, Config: server.Config{Listen: "127.0.0.1:0",
		Components: []string{server.ComponentProjector}, DataDir: t.TempDir()}})
	if !errors.Is(err, seal.ErrKeyRequired) || !strings.Contains(err.Error(), "INVLEDGER_SEAL_KEYS") {
		t.Fatalf("serve without a key on a keyed ledger: %v, want ErrKeyRequired", err)
	}
}
