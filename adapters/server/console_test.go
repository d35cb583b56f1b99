package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// Console tokens: olga holds an operator and an approver token, so the
// self-approval rule can be seen from both sides.
const (
	conGW  = "con-gateway-secret-01"
	conOp  = "con-operator-secret-1"
	conOA  = "con-olga-approver-01"
	conAp  = "con-approver-secret-1"
	conAu  = "con-auditor-secret-01"
	conKey = "console-test-key-0123456789abcdef"
)

const conTokens = "shop:gateway:" + conGW + ",olga:operator:" + conOp + ",olga:approver:" + conOA +
	",adam:approver:" + conAp + ",audrey:auditor:" + conAu

// browser is a console user: a cookie jar that does not follow redirects,
// so each answer can be checked.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		// What a browser sends with a form of the page's own origin.
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(raw)}
}

func (b *browser) signIn(token string) answer {
	b.t.Helper()
	return b.do("POST", "/console/signin", url.Values{"token": {token}, "next": {"/console/sales"}})
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page at path.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	a := b.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(a.body)
	if a.status != 200 || m == nil {
		b.t.Fatalf("GET %s = %d, no csrf field: %.300s", path, a.status, a.body)
	}
	return m[1]
}

func (b *browser) cookie() *http.Cookie {
	u, _ := url.Parse(b.base + "/console/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "invledger_console" {
			return c
		}
	}
	return nil
}

func want(t testing.TB, what string, a answer, status int, contains ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s = %d, want %d: %.400s", what, a.status, status, a.body)
	}
	for _, s := range contains {
		if !strings.Contains(a.body, s) {
			t.Fatalf("%s: answer lacks %q: %.2000s", what, s, a.body)
		}
	}
}

// TestConsoleSessions signs in as each role over a real serve, and checks
// what ends a session: sign-out (in every process sharing the key), the
// idle timeout, a gateway token, a form without its CSRF token or from
// another origin.
func TestConsoleSessions(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	sc := Config{Components: []string{ComponentAPI}, Tokens: conTokens, ConsoleKey: conKey, ConsoleIdleTimeout: 2 * time.Second}
	a, b := startServe(t, st, sc), startServe(t, st, sc)

	gw := newBrowser(t, a)
	want(t, "gateway sign-in", gw.signIn(conGW), 403, "Gateway tokens may not sign in")
	want(t, "bad token", gw.signIn("not-a-token-at-all-x"), 401, "not valid")
	want(t, "page without a session", gw.do("GET", "/console/sales", nil), 303)

	for _, tc := range []struct{ token, name, role string }{{conAu, "audrey", "auditor"}, {conOp, "olga", "operator"}, {conAp, "adam", "approver"}} {
		u := newBrowser(t, a)
		in := u.signIn(tc.token)
		want(t, tc.role+" sign-in", in, 303)
		if c := in.header.Get("Set-Cookie"); !strings.Contains(c, "HttpOnly") || !strings.Contains(c, "SameSite=Strict") || strings.Contains(c, "Secure") {
			t.Fatalf("%s: session cookie %s, want HttpOnly, SameSite=Strict and (plain HTTP) not Secure", tc.role, c)
		}
		for _, page := range []string{"/console/sales", "/console/approvals", "/console/reconciliation", "/console/health"} {
			want(t, tc.role+" "+page, u.do("GET", page, nil), 200, tc.name, `data-role="`+tc.role+`"`)
		}
		// What the page offers follows the role.
		appr := u.do("GET", "/console/approvals", nil)
		if got := strings.Contains(appr.body, `id="request-form"`); got != (tc.role == "operator") {
			t.Errorf("%s sees the request form: %v", tc.role, got)
		}
		if got := strings.Contains(u.do("GET", "/console/reconciliation", nil).body, `id="reconcile-form"`); got != (tc.role == "operator") {
			t.Errorf("%s sees the reconcile form: %v", tc.role, got)
		}
	}

	// One session, two processes: the cookie of a works on b, and a
	// sign-out on a is refused by b.
	u := newBrowser(t, a)
	want(t, "sign-in", u.signIn(conAu), 303)
	stolen := u.cookie()
	other := newBrowser(t, b)
	other.c.Jar.SetCookies(mustURL(t, b+"/console/"), []*http.Cookie{{Name: stolen.Name, Value: stolen.Value, Path: "/console/"}})
	want(t, "cookie of a on b", other.do("GET", "/console/sales", nil), 200, "audrey")

	token := u.csrf("/console/sales")
	want(t, "sign-out without csrf", u.do("POST", "/console/signout", url.Values{}), 403, "CSRF")
	want(t, "still signed in", u.do("GET", "/console/sales", nil), 200)
	want(t, "sign-out", u.do("POST", "/console/signout", url.Values{"csrf": {token}}), 303)
	want(t, "cookie after sign-out on b", other.do("GET", "/console/sales", nil), 303)
	replay := newBrowser(t, a)
	replay.c.Jar.SetCookies(mustURL(t, a+"/console/"), []*http.Cookie{{Name: stolen.Name, Value: stolen.Value, Path: "/console/"}})
	want(t, "cookie after sign-out on a", replay.do("GET", "/console/sales", nil), 303)

	// A cross-site form is refused by origin before anything else.
	x := newBrowser(t, a)
	want(t, "sign-in", x.signIn(conOp), 303)
	tok := x.csrf("/console/approvals")
	req, _ := http.NewRequest("POST", a+"/console/approvals", strings.NewReader(url.Values{"csrf": {tok}, "sku": {"x"}, "delta": {"1"}, "reason": {"r"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := x.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site form = %d, want 403", resp.StatusCode)
	}

	// Idle: the cookie is refused once older than the idle timeout.
	idle := newBrowser(t, a)
	want(t, "sign-in", idle.signIn(conAu), 303)
	want(t, "fresh", idle.do("GET", "/console/health", nil), 200)
	time.Sleep(3 * time.Second)
	want(t, "after the idle timeout", idle.do("GET", "/console/health", nil), 303)
}

// startConsoleServe starts a serve (API and projector) with the console's
// test tokens and key over a new private stack.
func startConsoleServe(t testing.TB) (*stacktest.Stack, string) {
	t.Helper()
	st := stacktest.New(t)
	return st, startServe(t, st, Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: conTokens, ConsoleKey: conKey})
}

// createWarm defines sku with body (stock and limit) and warms it.
func createWarm(t testing.TB, base, sku, body string) {
	t.Helper()
	want(t, "create "+sku, call(t, "PUT", base+"/v1/skus/"+sku, conOp, body), 201)
	want(t, "warm "+sku, call(t, "POST", base+"/v1/skus/"+sku+"/warm", conOp, ""), 200)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConsoleApprovalsAndReconciliation: olga requests an adjustment; as an
// approver she sees Approve disabled with the reason, and the server
// refuses her approval anyway; adam approves and the stock moves. A hand
// edit of Redis shows as a finding, then is repaired.
func TestConsoleApprovalsAndReconciliation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, base := startConsoleServe(t)
	createWarm(t, base, "con-1", `{"stock":10,"per_user_limit":2}`)

	op := newBrowser(t, base)
	want(t, "sign-in", op.signIn(conOp), 303)
	tok := op.csrf("/console/approvals")
	want(t, "request without csrf", op.do("POST", "/console/approvals", url.Values{"sku": {"con-1"}, "delta": {"5"}, "reason": {"restock"}}), 403)
	req := op.do("POST", "/console/approvals", url.Values{"csrf": {tok}, "sku": {"con-1"}, "delta": {"5"}, "reason": {"restock"}})
	want(t, "request", req, 303)
	want(t, "after the request", op.do("GET", req.header.Get("Location"), nil), 200, "requested; it waits for an approver.")
	want(t, "bad delta", op.do("POST", "/console/approvals", url.Values{"csrf": {tok}, "sku": {"con-1"}, "delta": {"five"}, "reason": {"x"}}), 303)

	self := newBrowser(t, base)
	want(t, "sign-in", self.signIn(conOA), 303)
	page := self.do("GET", "/console/approvals", nil)
	want(t, "own request", page, 200, `<button type="button" disabled aria-describedby="why-1">Approve</button>`, "You requested this")
	tok = csrfField.FindStringSubmatch(page.body)[1]
	refused := self.do("POST", "/console/approvals/1/approve", url.Values{"csrf": {tok}})
	want(t, "self-approval", refused, 303)
	want(t, "after the self-approval", self.do("GET", refused.header.Get("Location"), nil), 200, `class="msg problem"`)

	ap := newBrowser(t, base)
	want(t, "sign-in", ap.signIn(conAp), 303)
	page = ap.do("GET", "/console/approvals", nil)
	want(t, "other's request", page, 200, `action="/console/approvals/1/approve"`)
	tok = csrfField.FindStringSubmatch(page.body)[1]
	want(t, "approve", ap.do("POST", "/console/approvals/1/approve", url.Values{"csrf": {tok}}), 303)
	want(t, "stock moved", call(t, "GET", base+"/v1/skus/con-1", conAu, ""), 200, `"redis_stock":15`)
	want(t, "sku page", ap.do("GET", "/console/skus/con-1", nil), 200, `<output id="stock" aria-live="polite">15</output>`)

	// A hand edit of Redis, then a run without and with repair.
	st.WaitProjected(t, "con-1", 10*time.Second)
	if err := st.App.Redis.HSet(ctx, st.Keyspace.SKUKey("con-1"), "stock", 3).Err(); err != nil {
		t.Fatal(err)
	}
	tok = op.csrf("/console/reconciliation")
	want(t, "reconcile", op.do("POST", "/console/reconciliation", url.Values{"csrf": {tok}, "sku": {"con-1"}}), 303)
	want(t, "finding", op.do("GET", "/console/reconciliation", nil), 200, "<td>con-1</td>", "3 → —")
	want(t, "repair unconfirmed asks", op.do("POST", "/console/reconciliation", url.Values{"csrf": {tok}, "sku": {"con-1"}, "repair": {"yes"}}), 200, `id="confirm-form"`)
	want(t, "stock still edited", call(t, "GET", base+"/v1/skus/con-1", conAu, ""), 200, `"redis_stock":3`)
	want(t, "repair", op.do("POST", "/console/reconciliation", url.Values{"csrf": {tok}, "sku": {"con-1"}, "repair": {"yes"}, "confirm": {"yes"}}), 303)
	want(t, "repaired", op.do("GET", "/console/reconciliation", nil), 200, "3 → 15", "<td>yes</td>")
	want(t, "stock repaired", call(t, "GET", base+"/v1/skus/con-1", conAu, ""), 200, `"redis_stock":15`)
	// The auditor reads the runs but the API refuses its run.
	au := newBrowser(t, base)
	want(t, "sign-in", au.signIn(conAu), 303)
	tok = au.csrf("/console/reconciliation")
	refusedRun := au.do("POST", "/console/reconciliation", url.Values{"csrf": {tok}})
	want(t, "auditor's run", refusedRun, 303)
	want(t, "after the auditor's run", au.do("GET", refusedRun.header.Get("Location"), nil), 200, `class="msg problem"`)
}

// TestConsoleLiveFeed watches a SKU over the feed while it sells out: the
// events arrive, and the figures reach stock 0.
func TestConsoleLiveFeed(t *testing.T) {
	t.Parallel()
	_, base := startConsoleServe(t)
	createWarm(t, base, "live-1", `{"stock":5,"per_user_limit":5}`)
	au := newBrowser(t, base)
	want(t, "sign-in", au.signIn(conAu), 303)
	req, _ := http.NewRequest("GET", base+"/console/skus/live-1/feed", nil)
	client := &http.Client{Jar: au.c.Jar}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("feed = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := feedLines(resp.Body)
	// The tail starts with the first watcher; purchases begin once the
	// first figures show it is running.
	waitLine(t, lines, "event: figures", 10*time.Second)
	for i := range 5 {
		want(t, "deduct", call(t, "POST", base+"/v1/skus/live-1/deduct", conGW, `{"user_id":"u`+string(rune('a'+i))+`","qty":1,"request_id":"lr`+string(rune('a'+i))+`"}`), 200)
	}
	waitLine(t, lines, `"type":"deducted"`, 10*time.Second)
	waitLine(t, lines, `"stock":0,`, 10*time.Second)
	// A gateway has no session to watch with.
	resp2, err := http.Get(base + "/console/skus/live-1/feed")
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("feed without a session = %d, want 401", resp2.StatusCode)
	}
}

// feedLines hands on the lines of an SSE body until it ends.
func feedLines(body io.Reader) <-chan string {
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

func waitLine(t *testing.T, lines <-chan string, sub string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("feed ended before %q", sub)
			}
			if strings.Contains(l, sub) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q on the feed within %s", sub, within)
		}
	}
}

// TestConsoleSalesShowsHeldUnits: the Sales row of a SKU with an open hold
// shows the hold's units beside the initial stock.
func TestConsoleSalesShowsHeldUnits(t *testing.T) {
	t.Parallel()
	_, base := startConsoleServe(t)
	createWarm(t, base, "con-held", `{"stock":10,"per_user_limit":5}`)
	want(t, "reserve", call(t, "POST", base+"/v1/skus/con-held/holds", conGW,
		`{"user_id":"u1","qty":3,"request_id":"r1","ttl_seconds":600}`), 201)
	au := newBrowser(t, base)
	want(t, "sign-in", au.signIn(conAu), 303)
	page := au.do("GET", "/console/sales?q=con-held", nil)
	want(t, "sales", page, 200, ">Held</th>")
	if !regexp.MustCompile(`<td class="n">10</td>\s*<td class="n">3</td>`).MatchString(page.body) {
		t.Fatalf("the con-held row does not show initial stock 10 then 3 held: %.3000s", page.body)
	}
}

// TestConsoleRefusalsAcrossServeProcesses: two serve processes (each its
// own application, as behind a balancer) over one Redis and PostgreSQL.
// Purchases refused on both show, added up and for this SKU only, on the
// SKU page and the live feed of one of them.
func TestConsoleRefusalsAcrossServeProcesses(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	cfg := st.App.Config()
	cfg.Registry = nil // the second process has its own metrics
	other, err := app.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	sc := Config{Components: []string{ComponentAPI}, Tokens: conTokens, ConsoleKey: conKey}
	a, b := startServe(t, st, sc), startServeApp(t, other, sc)
	createWarm(t, a, "ref-1", `{"stock":1,"per_user_limit":1}`)
	createWarm(t, a, "ref-2", `{"stock":5,"per_user_limit":1}`)
	deduct := func(base, sku, user, req string, status int) {
		t.Helper()
		want(t, "deduct "+req, call(t, "POST", base+"/v1/skus/"+sku+"/deduct", conGW, `{"user_id":"`+user+`","qty":1,"request_id":"`+req+`"}`), status)
	}
	deduct(a, "ref-1", "u0", "r0", 200)
	for i := range 3 { // sold out, on a
		deduct(a, "ref-1", fmt.Sprintf("ua%d", i), fmt.Sprintf("ra%d", i), 409)
	}
	for i := range 2 { // sold out, on b
		deduct(b, "ref-1", fmt.Sprintf("ub%d", i), fmt.Sprintf("rb%d", i), 409)
	}
	deduct(b, "ref-2", "u0", "s0", 200)
	deduct(b, "ref-2", "u0", "s1", 409) // over the limit, another SKU
	au := newBrowser(t, a)
	want(t, "sign-in", au.signIn(conAu), 303)
	// The flushers add the counts within about a second.
	row := regexp.MustCompile(`<tr><td>sold_out</td><td class="n">(\d+)</td></tr>`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		page := au.do("GET", "/console/skus/ref-1", nil)
		if m := row.FindStringSubmatch(page.body); m != nil && m[1] == "5" {
			if strings.Contains(page.body, "already_purchased") {
				t.Fatalf("ref-1's page shows ref-2's refusal")
			}
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("ref-1's page after 10 s shows sold_out %v, want 5 (3 on a, 2 on b): %.3000s", m, page.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	resp, err := au.c.Get(a + "/console/skus/ref-2/feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := feedLines(resp.Body)
	waitLine(t, lines, `"refusals":{"already_purchased":1}`, 10*time.Second)
}

// skuLinks are the SKUs of a Sales page, in row order.
var skuLinks = regexp.MustCompile(`<td><a href="/console/skus/([^"]+)">`)

func salesRows(t *testing.T, b *browser, query string) []string {
	t.Helper()
	page := b.do("GET", "/console/sales?"+query, nil)
	want(t, "sales "+query, page, 200)
	var rows []string
	for _, m := range skuLinks.FindAllStringSubmatch(page.body, -1) {
		rows = append(rows, m[1])
	}
	return rows
}

// TestConsoleSalesSortFilterPage: the Sales page's rows follow the sort
// and its reverse, a filter by id or state hides every other SKU, and the
// pages split the rows 25 at a time.
func TestConsoleSalesSortFilterPage(t *testing.T) {
	t.Parallel()
	_, base := startConsoleServe(t)
	// srt-c is defined but not warmed.
	createWarm(t, base, "srt-a", `{"stock":30,"per_user_limit":1}`)
	createWarm(t, base, "srt-b", `{"stock":10,"per_user_limit":1}`)
	want(t, "create srt-c", call(t, "PUT", base+"/v1/skus/srt-c", conOp, `{"stock":20,"per_user_limit":1}`), 201)
	for i := range 27 {
		want(t, "create", call(t, "PUT", base+fmt.Sprintf("/v1/skus/pg-%02d", i), conOp, `{"stock":1,"per_user_limit":1}`), 201)
	}
	au := newBrowser(t, base)
	want(t, "sign-in", au.signIn(conAu), 303)
	for _, tc := range []struct{ query, want string }{
		{"q=srt&sort=initial&dir=asc", "srt-b srt-c srt-a"},
		{"q=srt&sort=initial&dir=desc", "srt-a srt-c srt-b"},
		{"q=srt&sort=sku&dir=desc", "srt-c srt-b srt-a"},
		{"q=SRT-B", "srt-b"},
		{"q=srt&state=not_warmed", "srt-c"},
		{"q=srt&state=open&sort=redis_stock&dir=desc", "srt-a srt-b"},
		{"q=pg-&page=2", "pg-25 pg-26"},
		{"q=nothing-like-this", ""},
	} {
		if got := strings.Join(salesRows(t, au, tc.query), " "); got != tc.want {
			t.Errorf("sales?%s rows = %q, want %q", tc.query, got, tc.want)
		}
	}
	if rows := salesRows(t, au, "q=pg-"); len(rows) != 25 || rows[0] != "pg-00" || rows[24] != "pg-24" {
		t.Errorf("first page of pg-: %d rows %v, want pg-00..pg-24", len(rows), rows)
	}
}

// TestConsoleFeedsAreCapped: on a serve with --max-conns 48 (so at most 12
// feeds), a session gets 4 feeds and a principal 8, each one more 429; the
// feeds of every principal together get 12, one more 503, while purchases
// are still served. Every feed of the SKUs of one partition shares one
// Redis reader; a feed of a SKU that does not exist is 404; closing a feed
// frees its place.
func TestConsoleFeedsAreCapped(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	base := startServe(t, st, Config{Components: []string{ComponentAPI}, Tokens: conTokens, ConsoleKey: conKey, MaxConns: 48, MaxConnsPerClient: 48})
	addr := strings.TrimPrefix(base, "http://")
	var skus []string // five SKUs of one partition
	for i := 0; len(skus) < 5; i++ {
		if sku := fmt.Sprintf("cap-%d", i); st.Keyspace.Partition(sku) == 0 {
			skus = append(skus, sku)
			createWarm(t, base, sku, `{"stock":5,"per_user_limit":1}`)
		}
	}
	sessions := map[string]*http.Cookie{}
	for _, s := range []struct{ name, token string }{{"au1", conAu}, {"au2", conAu}, {"au3", conAu}, {"op", conOp}, {"ap", conAp}} {
		b := newBrowser(t, base)
		want(t, "sign-in "+s.name, b.signIn(s.token), 303)
		sessions[s.name] = b.cookie()
	}
	feed := func(session, sku string) (net.Conn, *http.Response) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		c := sessions[session]
		if _, err := io.WriteString(conn, "GET /console/skus/"+sku+"/feed HTTP/1.1\r\nHost: x\r\nCookie: "+c.Name+"="+c.Value+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return conn, resp
	}
	open := func(session, sku string) net.Conn {
		t.Helper()
		conn, resp := feed(session, sku)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s's feed of %s = %d %s", session, sku, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return conn
	}
	refused := func(session, sku string, status int) {
		t.Helper()
		conn, resp := feed(session, sku)
		conn.Close()
		if resp.StatusCode != status || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s's feed of %s = %d (Retry-After %q), want %d with Retry-After", session, sku, resp.StatusCode, resp.Header.Get("Retry-After"), status)
		}
	}

	var first []net.Conn
	for _, sku := range skus[:4] {
		first = append(first, open("au1", sku))
	}
	refused("au1", skus[4], 429)
	// Four SKUs watched, one partition: one reader.
	ctx := context.Background()
	start := time.Now()
	localstacktest.WaitFor(t, "a stream reader", 10*time.Second, func() bool {
		list, err := st.RedisClient.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := strings.Count(list, "cmd=xread ")
		if n > 1 {
			t.Fatalf("four watched SKUs of one partition hold %d stream readers, want 1:\n%s", n, list)
		}
		// One reader, still one after 2 s: a second would have come by then.
		return n == 1 && time.Since(start) >= 2*time.Second
	})
	for _, sku := range skus[:4] {
		open("au2", sku)
	}
	refused("au3", skus[0], 429)
	for _, sku := range skus[1:] {
		open("op", sku)
	}
	refused("ap", skus[0], 503)
	want(t, "a purchase with every feed taken", call(t, "POST", base+"/v1/skus/"+skus[0]+"/deduct", conGW, `{"user_id":"u1","qty":1,"request_id":"r1"}`), 200)
	if _, resp := feed("ap", "no-such-sku"); resp.StatusCode != 404 {
		t.Fatalf("a feed of a SKU never defined = %d, want 404", resp.StatusCode)
	}

	first[0].Close()
	last := 0
	localstacktest.WaitFor(t, "a new feed answered 200 after one closed", 10*time.Second, func() bool {
		conn, resp := feed("au1", skus[4])
		if resp.StatusCode == 200 {
			return true
		}
		conn.Close()
		if resp.StatusCode != last {
			t.Logf("after a feed closed, a new one = %d", resp.StatusCode)
			last = resp.StatusCode
		}
		return false
	})
}

// TestConsoleHealthAfterARedisRestart: the Health page shows what it
// reads, not only reachability: after Redis restarts, the SKUs fenced
// until a reconciler verifies them (none runs here) are listed, beside the
// durability mode, the dead letters and the projector's lag per partition.
func TestConsoleHealthAfterARedisRestart(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	base := startServe(t, st, Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: conTokens, ConsoleKey: conKey})
	createWarm(t, base, "hl-1", `{"stock":5,"per_user_limit":1}`)
	createWarm(t, base, "hl-2", `{"stock":5,"per_user_limit":1}`)
	want(t, "deduct", call(t, "POST", base+"/v1/skus/hl-1/deduct", conGW, `{"user_id":"u","qty":1,"request_id":"h1"}`), 200)
	st.WaitProjected(t, "hl-1", 15*time.Second)
	au := newBrowser(t, base)
	want(t, "sign-in", au.signIn(conAu), 303)
	want(t, "health before", au.do("GET", "/console/health", nil), 200,
		`id="h-redis" class="ok">reachable`, `id="h-postgres" class="ok">reachable`,
		`id="h-durability">strict`, `id="h-dead">0<`, `<p id="fenced">None.</p>`,
		"<td>"+st.Keyspace.SKUStreamKey("hl-1")+"</td>")
	if err := st.Redis.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		page := au.do("GET", "/console/health", nil)
		if strings.Contains(page.body, `<li><a href="/console/skus/hl-1">hl-1</a></li>`) &&
			strings.Contains(page.body, `<li><a href="/console/skus/hl-2">hl-2</a></li>`) {
			want(t, "health after the restart", page, 200, `id="h-redis" class="ok">reachable`)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after a Redis restart the Health page lists no fenced hl-1 and hl-2: %.3000s", page.body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
