package server

import (
	"net/url"
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

// TestConsoleShowsNoTextFromTheLink: ?problem= and ?done= in a link put
// nothing on the genuine sign-in and console pages; a form's own outcome
// is shown once, on the page it returns to.
func TestConsoleShowsNoTextFromTheLink(t *testing.T) {
	t.Parallel()
	_, base := startConsoleServe(t)
	planted := url.Values{"problem": {"Your session expired: sign in at evil.example"}, "done": {"Call support on 555-0100"}}.Encode()
	anon := newBrowser(t, base)
	page := anon.do("GET", "/console/signin?"+planted, nil)
	want(t, "sign-in page", page, 200)
	b := newBrowser(t, base)
	want(t, "sign-in", b.signIn(conOp), 303)
	for _, a := range []answer{page, b.do("GET", "/console/sales?"+planted, nil), b.do("GET", "/console/approvals?"+planted, nil)} {
		if strings.Contains(a.body, "evil.example") || strings.Contains(a.body, "555-0100") {
			t.Fatalf("a page shows the link's text: %.2000s", a.body)
		}
	}
	tok := b.csrf("/console/approvals")
	back := b.do("POST", "/console/approvals", url.Values{"csrf": {tok}, "sku": {"x"}, "delta": {"five"}, "reason": {"x"}})
	want(t, "bad delta", back, 303)
	want(t, "after the form", b.do("GET", back.header.Get("Location"), nil), 200, "delta: a whole number of units")
	if again := b.do("GET", back.header.Get("Location"), nil); strings.Contains(again.body, "delta: a whole number") {
		t.Fatal("the outcome is shown again on the next visit")
	}
}
