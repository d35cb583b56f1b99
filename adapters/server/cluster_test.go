package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// deductBody is a purchase of one unit by user with request id req.
func deductBody(user, req string) string {
	return fmt.Sprintf(`{"user_id":%q,"qty":1,"request_id":%q}`, user, req)
}

// TestClusterOutagesAnswer503WithRetryAfter kills one master of a 3-master
// Redis Cluster under a serving API. Its SKUs answer 503 unavailable with
// Retry-After and "retry with the same request_id" on every endpoint that
// reads Redis; the other masters' SKUs go on selling. When the cluster
// is made to require full coverage, the other masters answer CLUSTERDOWN,
// which is 503 too. The answers are counted in
// invledger_http_unavailable_total. After the restart, the dead master's
// SKUs sell again on their own.
func TestClusterOutagesAnswer503WithRetryAfter(t *testing.T) {
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithRedisCluster(func(*localstack.ClusterConfig) {}))
	skus, list := st.ClusterSKUs(t, "c503-", 1000)
	api := startServe(t, st, Config{Tokens: testTokens, Components: []string{ComponentAPI, ComponentReconciler},
		ReconcileInterval: time.Hour})

	downSKU := list[0]
	down := st.MasterOf(t, downSKU)
	var upSKUs []string
	for addr, sku := range skus {
		if addr != down.Addr() {
			upSKUs = append(upSKUs, sku)
		}
	}
	if err := down.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want503 := func(what, method, path, secret, body string) {
		t.Helper()
		r := call(t, method, api+path, secret, body)
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"unavailable"`) ||
			!strings.Contains(r.body, "retry with the same request_id") {
			t.Fatalf("%s: %s %s: %d %v %s, want 503 unavailable with Retry-After", what, method, path, r.status, r.header, r.body)
		}
	}
	for i := range 3 {
		want503("master down", "POST", "/v1/skus/"+downSKU+"/deduct", secretGateway, deductBody(fmt.Sprint("u", i), fmt.Sprint("r", i)))
	}
	want503("master down", "GET", "/v1/skus/"+downSKU, secretAuditor, "")
	for i, sku := range upSKUs {
		if r := call(t, "POST", api+"/v1/skus/"+sku+"/deduct", secretGateway, deductBody("u-up", fmt.Sprint("up", i))); r.status != 200 {
			t.Fatalf("deduct on %s, whose master is up: %d %s", sku, r.status, r.body)
		}
	}

	// With two of three masters down, the last one is in a minority and
	// refuses every command: CLUSTERDOWN.
	var second *localstack.RedisServer
	for _, n := range st.Cluster.Nodes {
		if n.Addr() != down.Addr() && n.Running() {
			second = n
			break
		}
	}
	if err := second.Kill(); err != nil {
		t.Fatal(err)
	}
	var lastSKU string
	for addr, sku := range skus {
		if addr != down.Addr() && addr != second.Addr() {
			lastSKU = sku
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		r := call(t, "POST", api+"/v1/skus/"+lastSKU+"/deduct", secretGateway, deductBody(fmt.Sprint("cd", i), fmt.Sprint("cd", i)))
		if r.status == 503 && strings.Contains(r.body, "retry with the same request_id") && r.header.Get("Retry-After") != "" {
			break
		}
		if r.status != 200 || time.Now().After(deadline) {
			t.Fatalf("deduct on %s, the last master up: %d %s, want 200 until CLUSTERDOWN, then 503", lastSKU, r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	metrics := call(t, "GET", api+"/metrics", "", "").body
	if !strings.Contains(metrics, `invledger_http_unavailable_total{code="unavailable",route="POST /v1/skus/{sku}/deduct"}`) {
		t.Fatalf("/metrics does not count the 503 answers:\n%s", grepLines(metrics, "unavailable_total"))
	}

	for _, n := range []*localstack.RedisServer{down, second} {
		if err := n.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		r := call(t, "POST", api+"/v1/skus/"+downSKU+"/deduct", secretGateway, deductBody(fmt.Sprint("back", i), fmt.Sprint("back", i)))
		if r.status == 200 {
			break
		}
		if r.status != 503 || time.Now().After(deadline) {
			t.Fatalf("deduct on %s after its master restarted: %d %s", downSKU, r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the killed master's SKU sold again %v after the kill", time.Since(start).Round(10*time.Millisecond))
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}

// setOnEveryRunning sets a Redis setting on every running node of st's cluster.
func configSet(t *testing.T, addr, key, value string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.ConfigSet(context.Background(), key, value).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestServeStartsWithAMasterDownAndChecksEveryMaster: the durability check
// reads every master, so one master on everysec refuses strict mode
// whichever it is. serve starts while one master is down, sells the other
// masters' SKUs, answers 503 for the down one's, and sells them once it is
// back. A master turned unsafe while serving stops sales until fixed.
func TestServeStartsWithAMasterDownAndChecksEveryMaster(t *testing.T) {
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithRedisCluster(func(*localstack.ClusterConfig) {}))
	skus, list := st.ClusterSKUs(t, "start-", 1000)
	for addr := range skus {
		configSet(t, addr, "appendfsync", "everysec")
		err := checkDurability(ctx, st.App.Redis, safetyPolicy{mode: "strict"}, quiet)
		if !errors.Is(err, domain.ErrUnsafeRedis) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("master %s on everysec: %v, want unsafe naming it", addr, err)
		}
		configSet(t, addr, "appendfsync", "always")
	}
	if err := checkDurability(ctx, st.App.Redis, safetyPolicy{mode: "strict"}, quiet); err != nil {
		t.Fatalf("every master on always: %v", err)
	}

	down := st.MasterOf(t, list[0])
	if err := down.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	api := startServe(t, st, Config{Tokens: testTokens, Components: []string{ComponentAPI, ComponentReconciler},
		ReconcileInterval: time.Hour})
	t.Logf("serve listening %v after a master was killed", time.Since(start).Round(10*time.Millisecond))
	i := 0
	deduct := func(sku string) answer {
		i++
		return call(t, "POST", api+"/v1/skus/"+sku+"/deduct", secretGateway, deductBody(fmt.Sprint("u", i), fmt.Sprint("r", i)))
	}
	var upAddr string
	for addr, sku := range skus {
		if addr == down.Addr() {
			if r := deduct(sku); r.status != 503 || r.header.Get("Retry-After") == "" {
				t.Fatalf("deduct on %s, whose master is down: %d %s", sku, r.status, r.body)
			}
			continue
		}
		upAddr = addr
		if r := deduct(sku); r.status != 200 {
			t.Fatalf("deduct on %s, whose master is up: %d %s", sku, r.status, r.body)
		}
	}

	// Reconciliation checks the SKUs of the masters that are up, and only
	// those, without a finding.
	rep, err := st.App.Reconciler.Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
	if err != nil || rep.Checked != len(skus)-1 || rep.Unreachable != 1 || len(rep.Drifts) != 0 {
		t.Fatalf("reconcile with a master down: %+v %v, want %d checked, 1 unreachable, no drift", rep, err, len(skus)-1)
	}

	if err := down.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	waitStatus(t, func() answer { return deduct(skus[down.Addr()]) }, 200, 30*time.Second)
	t.Logf("the master's SKU sold %v after its restart", time.Since(back).Round(10*time.Millisecond))

	configSet(t, upAddr, "appendfsync", "everysec")
	r := waitStatus(t, func() answer { return deduct(skus[upAddr]) }, 503, 10*time.Second)
	if !strings.Contains(r.body, "unsafe_redis") {
		t.Fatalf("deduct on a master turned everysec: %d %s", r.status, r.body)
	}
	configSet(t, upAddr, "appendfsync", "always")
	waitStatus(t, func() answer { return deduct(skus[upAddr]) }, 200, 10*time.Second)
}

// waitStatus calls f until it answers status, failing the test after limit.
func waitStatus(t *testing.T, f func() answer, status int, limit time.Duration) answer {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := f()
		if r.status == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d %s after %v, want %d", r.status, r.body, limit, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
