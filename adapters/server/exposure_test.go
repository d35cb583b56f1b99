package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
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

// TestConsoleSignInFailuresAreSlowedLoggedAndCounted: wrong tokens from
// one address are logged with the address and counted; after five the
// next try is answered 429 with Retry-After without being looked at (the
// right token too), while another address signs in. Console routes get
// the API's access line.
func TestConsoleSignInFailuresAreSlowedLoggedAndCounted(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	logs := &logLines{seen: make(chan struct{}, 1)}
	st.App.Log = slog.New(logs)
	base := startServe(t, st, Config{Components: []string{ComponentAPI}, Tokens: conTokens, ConsoleKey: conKey})
	addr := strings.TrimPrefix(base, "http://")
	signIn := func(local, token string) *http.Response {
		t.Helper()
		conn := dialFrom(t, addr, local)
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		body := url.Values{"token": {token}, "next": {"/console/sales"}}.Encode()
		if _, err := io.WriteString(conn, "POST /console/signin HTTP/1.1\r\nHost: x\r\nSec-Fetch-Site: same-origin\r\n"+
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		if resp := signIn("127.0.0.1", fmt.Sprintf("wrong-guess-%03d-xxxxxx", i)); resp.StatusCode != 401 {
			t.Fatalf("wrong token %d = %d, want 401", i, resp.StatusCode)
		}
	}
	logs.waitFor(t, "console sign-in failed: the token is not valid client=127.0.0.1 failures=5")
	for _, token := range []string{"wrong-guess-006-xxxxxx", conAu} {
		if resp := signIn("127.0.0.1", token); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a try after five wrong tokens = %d (Retry-After %q), want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if resp := signIn("127.0.0.2", conAu); resp.StatusCode != 303 {
		t.Fatalf("another address's sign-in = %d, want 303", resp.StatusCode)
	}
	logs.waitFor(t, "http request method=POST route=POST /console/signin status=303")
	m := call(t, "GET", base+"/metrics", "", "")
	want(t, "/metrics", m, 200, `invledger_console_signin_failures_total{reason="bad_token"} 5`,
		`invledger_console_signin_failures_total{reason="throttled"} 2`)
}
