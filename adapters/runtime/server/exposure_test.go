package server

import (
	"regexp"
	"strings"
	"testing"
)

// TestMetricsNameNoSKU: after a full reconciliation of two SKUs with open
// holds, the unauthenticated /metrics counts the holds in one series and
// names no SKU anywhere.
func TestMetricsNameNoSKU(t *testing.T) {
	t.Parallel()
	_, base := startConsoleServe(t)
	for _, sku := range []string{"unreleased-phone", "unreleased-tablet"} {
		createWarm(t, base, sku, `{"stock":5,"per_user_limit":2}`)
		want(t, "hold "+sku, call(t, "POST", base+"/v1/skus/"+sku+"/holds", conGW,
			`{"user_id":"u1","qty":1,"request_id":"r-`+sku+`","ttl_seconds":300}`), 201)
	}
	want(t, "reconcile", call(t, "POST", base+"/v1/reconcile", conOp, `{}`), 200)
	m := call(t, "GET", base+"/metrics", "", "")
	want(t, "/metrics", m, 200, "\ninvledger_holds_open 2\n")
	if lines := regexp.MustCompile(`(?m)^.*(sku="|unreleased-).*$`).FindAllString(m.body, -1); len(lines) > 0 {
		t.Fatalf("/metrics names SKUs:\n%s", strings.Join(lines, "\n"))
	}
}
