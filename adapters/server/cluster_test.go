package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/localstack"
	"github.com/invledger/invledger/adapters/stacktest"
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
	skus := st.ClusterSKUs(t, "c503-")
	for _, sku := range skus {
		st.SKU(t, sku, 1000, 1)
	}
	api := startServe(t, st, Config{Tokens: testTokens, Components: []string{ComponentAPI, ComponentReconciler},
		ReconcileInterval: time.Hour})

	var down *localstack.RedisServer
	for _, n := range st.Cluster.Nodes {
		if _, ok := skus[n.Addr()]; ok {
			down = n
			break
		}
	}
	downSKU := skus[down.Addr()]
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
