package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// serveProcess runs `invledger serve` as a child process over stack, so a
// test can kill -9 it; it answers once /readyz does.
func serveProcess(t *testing.T, stack *localstack.Stack, tokens string) (api string, proc *os.Process) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--archive-after", "0", "--retire-after", "0")
	cmd.Env = append(os.Environ(), readmeCLIEnv+"=1", "INVLEDGER_REDIS_URL="+stack.Redis.URL(),
		"INVLEDGER_DATABASE_URL="+stack.DatabaseURL, "INVLEDGER_TOKENS="+tokens, "INVLEDGER_LOG_LEVEL=error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	api = "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(api + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api, cmd.Process
			}
		}
	}
	t.Fatal("serve did not become ready")
	return "", nil
}

// TestKillServeDuringRetirement kills -9 the serve process that runs a
// retirement, at several moments of it, then retires again: every SKU
// ends fully retired, and at the kill it was fully present or fully
// retired in Redis, never half.
func TestKillServeDuringRetirement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stack := localstacktest.Stack(t)
	if err := app.Migrate(ctx, stack.DatabaseURL, quietLogger()); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(ctx, app.Config{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	const op = "retire-operator-0001"
	api, proc := serveProcess(t, stack, "ops:operator:"+op)

	for trial, delay := range []time.Duration{0, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		sku := fmt.Sprintf("kill-retire-%d", trial)
		sellCloseArchive(t, a, sku, 200)

		done := make(chan struct{})
		go func() {
			defer close(done)
			req, _ := http.NewRequest(http.MethodPost, api+"/v1/skus/"+sku+"/retire", nil)
			req.Header.Set("Authorization", "Bearer "+op)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}()
		time.Sleep(delay)
		if err := proc.Kill(); err != nil {
			t.Fatal(err)
		}
		<-done
		retiredInRedis := redisRetirement(t, a, sku)
		id, err := domain.NewSKUID(sku)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := approot.Of(a).Adapters.SKUs.Record(ctx, id)
		if err != nil || (rec.Retired != nil && !retiredInRedis) {
			t.Fatalf("%s at the kill: %+v %v; SQL may only say retired after Redis did", sku, rec, err)
		}
		t.Logf("killed %v into the retirement of %s: retired in Redis %v, in SQL %v", delay, sku, retiredInRedis, rec.Retired != nil)

		api, proc = serveProcess(t, stack, "ops:operator:"+op)
		if code, m := (apiClient{t: t, api: api}).call(http.MethodPost, "/v1/skus/"+sku+"/retire", op, ""); code != http.StatusOK || m["status"] != "retired" {
			t.Fatalf("retire %s again after the kill: %d %v", sku, code, m)
		}
		if !redisRetirement(t, a, sku) {
			t.Fatalf("%s is not retired in Redis after the rerun", sku)
		}
		rec, err = approot.Of(a).Adapters.SKUs.Record(ctx, id)
		if err != nil || rec.Retired == nil {
			t.Fatalf("%s after the rerun: %+v %v, want retired in SQL", sku, rec, err)
		}
	}
}

// redisRetirement tells whether sku is fully retired in Redis (no key,
// tombstoned) or fully present (hash and receipts, no tombstone), and
// fails the test on anything in between.
func redisRetirement(t *testing.T, a *app.Application, sku string) bool {
	t.Helper()
	ctx := context.Background()
	n, err := a.Redis.Exists(ctx, approot.Of(a).Keys.SKUKeys(sku)...).Result()
	if err != nil {
		t.Fatal(err)
	}
	tomb, err := a.Redis.SIsMember(ctx, approot.Of(a).Keys.SKUTombstoneKey(sku), sku).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Archived, a SKU keeps its hash, with its receipts in it in one hash
	// (docs/storage.md), or beside it in the 1.0 layout.
	live := int64(1)
	if approot.Of(a).Keys.Layout() == redisinventory.LayoutThreeHashes {
		live = 2
	}
	switch {
	case n == 0 && tomb:
		return true
	case n == live && !tomb:
		return false
	}
	t.Fatalf("%s is half retired: %d of its keys exist, tombstone %v", sku, n, tomb)
	return false
}

// sellCloseArchive sells units units of a new SKU, one per user, closes
// it, waits for the ledger to catch up and archives its buyers.
func sellCloseArchive(t *testing.T, a *app.Application, sku string, units int) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := a.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: int64(units)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Service.Warm(ctx, sku); err != nil {
		t.Fatal(err)
	}
	for i := range units {
		if _, err := a.Service.Deduct(ctx, ledger.MustDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Archiver.CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := a.Archiver.ArchiveBuyers(ctx, sku)
		if err == nil {
			return
		}
		if !errors.Is(err, ledger.ErrLedgerBehind) || time.Now().After(deadline) {
			t.Fatalf("archive %s: %v", sku, err)
		}
	}
}
