package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestAnOrderCutShortByAKilledServeGivesEveryLineBack places an order of
// four SKUs in four partitions on a serve process, kills it with SIGKILL
// after its second line is reserved, and waits past the ttl: another serve
// (API with its sweeper, and the projector) gives every reserved line back,
// Redis and the ledger agree on every SKU's stock and held units, and a
// reconciliation finds no drift.
func TestAnOrderCutShortByAKilledServeGivesEveryLineBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	var skus []string
	used := map[int]bool{}
	for i := 0; len(skus) < 4; i++ {
		sku := fmt.Sprintf("crash-%d", i)
		if p := st.Keyspace.Partition(sku); !used[p] {
			used[p] = true
			skus = append(skus, sku)
			st.SKU(t, sku, 10, 5)
		}
	}
	startServe(t, st, Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: testTokens})
	child := spawnChild(t, childConfig{RedisURL: st.Redis.URL(), DatabaseURL: st.DatabaseURL,
		Components: []string{ComponentAPI}, DataDir: t.TempDir(), PauseOrderAfterLines: 2})
	child.waitListening(t)

	var body strings.Builder
	body.WriteString(`{"order_id":"crash-1","user_id":"u1","ttl_seconds":1,"lines":[`)
	for i, sku := range skus {
		if i > 0 {
			body.WriteString(",")
		}
		fmt.Fprintf(&body, `{"sku":%q,"qty":%d}`, sku, i+1)
	}
	body.WriteString("]}")
	pauseAndKill(t, child, "/v1/orders", body.String(), "ORDER-PAUSED")
	held := func(sku string) (stock, held string) {
		v := st.RedisClient.HMGet(ctx, st.Keyspace.SKUKey(sku), "stock", "held").Val()
		stock, _ = v[0].(string)
		held, _ = v[1].(string)
		return stock, held
	}
	for i, sku := range skus[:2] {
		if stock, h := held(sku); stock != fmt.Sprint(10-(i+1)) || h != fmt.Sprint(i+1) {
			t.Fatalf("after the kill, %s has stock %s and held %s: its line was not reserved", sku, stock, h)
		}
	}

	waitAllBack(t, st, skus...)
}

// TestAConfirmKilledHalfwayIsUndoneAfterTheTTL places an order of two SKUs
// on one serve and confirms it on a serve process killed with SIGKILL
// after the first line is confirmed. The order can no longer be confirmed
// whole once its second line expires, so the first serve, whose sweeper
// expires that line, releases the first: both SKUs end where they began,
// in Redis and in the ledger, and a reconciliation finds no drift.
func TestAConfirmKilledHalfwayIsUndoneAfterTheTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "half-a", 10, 5)
	st.SKU(t, "half-b", 10, 5)
	api := startServe(t, st, Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: testTokens})
	if r := call(t, "POST", api+"/v1/orders", secretGateway,
		`{"order_id":"half","user_id":"u1","ttl_seconds":2,"lines":[{"sku":"half-a","qty":2},{"sku":"half-b","qty":3}]}`); r.status != 201 {
		t.Fatalf("place = %d %s", r.status, r.body)
	}
	child := spawnChild(t, childConfig{RedisURL: st.Redis.URL(), DatabaseURL: st.DatabaseURL,
		Components: []string{ComponentAPI}, DataDir: t.TempDir(), PauseConfirmAfterLines: 1})
	child.waitListening(t)
	pauseAndKill(t, child, "/v1/orders/half/confirm", "", "CONFIRM-PAUSED")
	if held := st.RedisClient.HGet(ctx, st.Keyspace.SKUKey("half-a"), "held").Val(); held != "0" {
		t.Fatalf("after the kill, half-a holds %q units: its line was not confirmed", held)
	}

	waitAllBack(t, st, "half-a", "half-b")
	var released int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE sku = 'half-a' AND type = 'released'`).Scan(&released); err != nil || released != 1 {
		t.Fatalf("half-a has %d released events (%v); want its confirmed line released once", released, err)
	}
}

// pauseAndKill sends a POST of body to path on child in the background,
// waits until the child prints want (the operation stopped halfway by its
// test hook), and kills it with SIGKILL.
func pauseAndKill(t *testing.T, child *serveProcess, path, body, want string) {
	t.Helper()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, child.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secretGateway)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case line := <-child.Lines():
		if line != want {
			t.Fatalf("serve process: %s, want %s", line, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("POST %s did not print %s within 30s", path, want)
	}
	child.kill()
}

// waitAllBack waits until each of skus, stocked with 10 units, has them
// all back in Redis and none held, then until the ledger's balances say
// the same, and checks that a reconciliation finds no drift.
func waitAllBack(t *testing.T, st *stacktest.Stack, skus ...string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for _, sku := range skus {
		for {
			v := st.RedisClient.HMGet(ctx, st.Keyspace.SKUKey(sku), "stock", "held").Val()
			if v[0] == "10" && (v[1] == nil || v[1] == "0") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has stock %v and held %v 30 s on; want 10 and 0", sku, v[0], v[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
		st.WaitProjected(t, sku, 30*time.Second)
		var stock, held int64
		if err := st.Pool.QueryRow(ctx, `SELECT balance, held FROM balances WHERE sku = $1`, sku).Scan(&stock, &held); err != nil {
			t.Fatal(err)
		}
		if stock != 10 || held != 0 {
			t.Errorf("the ledger has %s at stock %d, held %d; Redis at 10 and 0", sku, stock, held)
		}
	}
	rep, err := st.App.Reconciler.Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil || len(rep.Drifts) != 0 {
		t.Fatalf("reconcile: %+v, %v; want no drift", rep, err)
	}
}
