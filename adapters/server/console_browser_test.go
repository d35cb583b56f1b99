package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// screenshotsEnv names the directory `make screenshots` has the browser
// test write each page's image into; make test leaves it unset and
// writes nothing.
const screenshotsEnv = "INVLEDGER_CONSOLE_SCREENSHOTS"

// chromium finds Debian's chromium (scripts/install-deps.sh installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: run scripts/install-deps.sh")
	return ""
}

// page is one browser tab driven by the test.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	axe  string
	shot string // screenshot directory, or ""
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatal(err)
	}
}

func eval[T any](p *page, js string, opts ...chromedp.EvaluateOption) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		p.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitFor polls js until it is truthy, within d. A poll cut short by a
// navigation (a form sent, a redirect) is started again on the new page.
func (p *page) waitFor(js string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		ctx, cancel := context.WithTimeout(p.ctx, left+5*time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(left), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			p.t.Fatalf("waiting for %s: %v\npage: %.1500s", js, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *page) open(path string) {
	p.t.Helper()
	p.do(chromedp.Navigate(p.base + path))
}

func (p *page) path() string {
	return eval[string](p, `location.pathname`)
}

func (p *page) text(css string) string {
	return eval[string](p, fmt.Sprintf(`(document.querySelector(%q)||{}).innerText||""`, css))
}

// signIn pastes token on the sign-in page and sends it.
func (p *page) signIn(token string) {
	p.t.Helper()
	p.open("/console/signin")
	p.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS(`form button[type=submit]`)))
	p.waitFor(`document.readyState === "complete" && location.pathname !== "/console/signin" || document.querySelector('[role=alert]')`, 10*time.Second)
}

func (p *page) signOut() {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(`form.who button`)))
	p.waitFor(`location.pathname === "/console/signin" && document.readyState === "complete"`, 10*time.Second)
}

// check runs axe-core on the page and fails on serious or critical
// violations, checks that neither a 1280×800 screen nor a phone-width one
// scrolls sideways, and takes the page's screenshot when asked to.
func (p *page) check(name string) {
	p.t.Helper()
	type violation struct {
		ID, Impact, Help string
		Nodes            []string
	}
	eval[bool](p, p.axe+`;true`)
	vs := eval[[]violation](p, `axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations
		.filter(v => v.impact === "serious" || v.impact === "critical")
		.map(v => ({ID: v.id, Impact: v.impact, Help: v.help, Nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))})))`, chromedp.EvalAwaitPromise)
	for _, v := range vs {
		p.t.Errorf("%s: axe %s (%s): %s at %v", name, v.ID, v.Impact, v.Help, v.Nodes)
	}
	for _, vp := range []struct{ w, h int64 }{{390, 844}, {1280, 800}} {
		p.do(chromedp.EmulateViewport(vp.w, vp.h))
		if over := eval[int](p, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); over > 1 {
			p.t.Errorf("%s at %d×%d scrolls sideways by %dpx", name, vp.w, vp.h, over)
		}
	}
	p.snap(name)
}

// snap saves the page's screenshot as name.png when asked to.
func (p *page) snap(name string) {
	p.t.Helper()
	if p.shot == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.MkdirAll(p.shot, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shot, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *page) sessionCookie() *network.Cookie {
	p.t.Helper()
	res, err := chromedp.Run(p.ctx, chromedp.Action[network.GetCookiesResult](func(ctx context.Context, t *chromedp.Target) (network.GetCookiesResult, error) {
		return cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{p.base + "/console/"}})
	}))
	if err != nil {
		p.t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "invledger_console" {
			return c
		}
	}
	return nil
}

func (p *page) setCookie(c *network.Cookie) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Action[chromedp.Void](func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{Name: c.Name, Value: c.Value, URL: p.base + "/console/", Path: "/console/"})
		return chromedp.Void{}, err
	}))
	if err != nil {
		p.t.Fatal(err)
	}
}

// TestConsoleInABrowser drives the console in a real headless Chromium
// against a real serve: sign-in as each role, a sale watched to stock 0 on
// the live page (the delay is logged), the two-person adjustment, a
// reconciliation that finds and repairs a hand edit of Redis, sign-out, the
// old cookie refused after sign-out and after the idle timeout, a form
// without its CSRF token refused, and axe-core on every page.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	began := time.Now()
	axe, err := os.ReadFile("../internal/console/testdata/axe-4.10.3.min.js")
	if err != nil {
		t.Fatal(err)
	}
	shots := os.Getenv(screenshotsEnv)
	st := stacktest.New(t)
	sc := Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: conTokens, ConsoleKey: conKey}
	base := startServe(t, st, sc)
	sc.ConsoleIdleTimeout = 2 * time.Second
	idleBase := startServe(t, st, sc)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)), chromedp.UserDataDir(t.TempDir()),
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 800))
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	p := &page{t: t, ctx: ctx, base: base, axe: string(axe), shot: shots}
	// The first action starts the browser, which lives as long as the
	// context of that call: it gets no timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}

	p.open("/console/sales")
	if got := p.path(); got != "/console/signin" {
		t.Fatalf("without a session /console/sales went to %s", got)
	}
	p.check("signin")
	p.signIn(conGW)
	if !strings.Contains(p.text("[role=alert]"), "Gateway tokens may not sign in") {
		t.Fatalf("gateway sign-in: %q", p.text("main"))
	}
	for _, u := range []struct{ token, name, role string }{{conAu, "audrey", "auditor"}, {conAp, "adam", "approver"}, {conOp, "olga", "operator"}} {
		p.signIn(u.token)
		if got := p.text("form.who span"); !strings.Contains(got, u.name) || !strings.Contains(got, u.role) {
			t.Fatalf("signed in as %s: header says %q", u.role, got)
		}
		if u.role != "operator" {
			p.signOut()
		}
	}

	// The sale, watched live by the operator.
	createWarm(t, base, "flash-1", `{"stock":150,"per_user_limit":1}`)
	for i := range 3 {
		want(t, "other", call(t, "PUT", fmt.Sprintf("%s/v1/skus/other-%d", base, i), conOp, `{"stock":5,"per_user_limit":1}`), 201)
	}
	p.open("/console/sales")
	p.waitFor(`document.querySelector("#sales a[href='/console/skus/flash-1']")`, 5*time.Second)
	p.check("sales")
	p.open("/console/skus/flash-1")
	p.waitFor(`document.getElementById("feed-status").textContent === "live" && document.getElementById("stock").textContent === "150"`, 10*time.Second)
	var soldOutNano atomic.Int64
	var wg sync.WaitGroup
	// 160 buyers for 150 units, about 40 a second, so the chart has a
	// few seconds to draw.
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < 160; i += 8 {
				a := call(t, "POST", base+"/v1/skus/flash-1/deduct", conGW, fmt.Sprintf(`{"user_id":"b%d","qty":1,"request_id":"q%d"}`, i, i))
				if a.status == 200 && strings.Contains(a.body, `"remaining":0`) {
					soldOutNano.Store(time.Now().UnixNano())
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	p.waitFor(`Number(document.getElementById("stock").textContent) < 60`, 15*time.Second)
	p.snap("sku-live")
	p.waitFor(`document.getElementById("stock").textContent === "0"`, 15*time.Second)
	seen := time.Now()
	wg.Wait()
	soldOut := time.Unix(0, soldOutNano.Load())
	if soldOutNano.Load() == 0 {
		t.Fatal("no purchase answered remaining 0")
	}
	t.Logf("stock 0 shown on the live page %v after the last unit was sold (bound 15s)", max(0, seen.Sub(soldOut)).Round(time.Millisecond))
	p.waitFor(`document.querySelectorAll("#newest tbody tr:not(.empty)").length > 0`, 5*time.Second)
	p.waitFor(`Number(document.getElementById("per-second").textContent) >= 0 && document.querySelector("#chart .uplot")`, 5*time.Second)
	st.WaitProjected(t, "flash-1", 15*time.Second)
	p.open("/console/skus/flash-1")
	p.waitFor(`document.querySelectorAll("#history tbody tr").length === 50 && document.getElementById("feed-status").textContent === "live"`, 10*time.Second)
	p.check("sku")

	// Two people for one stock change, requested from the keyboard alone:
	// Tab from the top of the page reaches every control of the form in
	// order, typing fills each, and Enter on the button sends it.
	p.open("/console/approvals")
	fill := map[string]string{"adj-sku": "flash-1", "adj-delta": "7", "adj-reason": "returned stock"}
	var reached []string
	for range 60 {
		p.do(chromedp.KeyEvent(kb.Tab))
		id := eval[string](p, `document.activeElement.matches("#request-form button") ? "request" : document.activeElement.id`)
		if v, ok := fill[id]; ok {
			reached = append(reached, id)
			p.do(chromedp.KeyEvent(v))
		}
		if id == "request" {
			reached = append(reached, id)
			break
		}
	}
	if got := strings.Join(reached, " "); got != "adj-sku adj-delta adj-reason request" {
		t.Fatalf("Tab reached %q of the request form, want adj-sku adj-delta adj-reason request", got)
	}
	p.do(chromedp.KeyEvent(kb.Enter))
	p.waitFor(`document.querySelector("[role=status]") && document.querySelector("#pending tbody tr[id^=adj-]")`, 10*time.Second)
	// A form whose CSRF token was taken out is refused.
	eval[bool](p, `document.querySelector('#request-form input[name=csrf]').remove(); true`)
	p.do(chromedp.SetValue(chromedp.CSS("#adj-sku"), "flash-1"), chromedp.SetValue(chromedp.CSS("#adj-delta"), "1"),
		chromedp.SetValue(chromedp.CSS("#adj-reason"), "no token"), chromedp.Click(chromedp.CSS(`#request-form button`)))
	p.waitFor(`document.querySelector("h1") && document.querySelector("h1").textContent === "Refused"`, 10*time.Second)
	if !strings.Contains(p.text("main"), "CSRF") {
		t.Fatalf("form without its CSRF token: %q", p.text("main"))
	}
	p.open("/console/approvals")
	p.signOut()
	p.signIn(conOA) // olga again, now with her approver token
	p.open("/console/approvals")
	if dis := eval[bool](p, `document.querySelector("#pending tbody tr[id^=adj-] button").disabled`); !dis {
		t.Fatal("olga's own request: Approve is not disabled")
	}
	if why := p.text("#pending .why"); !strings.Contains(why, "another approver") {
		t.Fatalf("disabled Approve says %q", why)
	}
	p.check("approvals-own")
	p.signOut()
	p.signIn(conAp)
	p.open("/console/approvals")
	p.do(chromedp.Click(chromedp.CSS(`#pending form[action$="/approve"] button`)))
	p.waitFor(`document.querySelector("[role=status]") && /approved|applied/.test(document.querySelector("[role=status]").textContent)`, 10*time.Second)
	p.check("approvals")
	p.open("/console/skus/flash-1")
	p.waitFor(`document.getElementById("stock").textContent === "7"`, 10*time.Second)
	p.signOut()

	// A hand edit of Redis, found and then repaired by the operator.
	st.WaitProjected(t, "flash-1", 15*time.Second)
	if err := st.App.Redis.HSet(context.Background(), st.Keyspace.SKUKey("flash-1"), "stock", 2).Err(); err != nil {
		t.Fatal(err)
	}
	p.signIn(conOp)
	p.open("/console/reconciliation")
	p.do(chromedp.SetValue(chromedp.CSS("#rec-sku"), "flash-1"), chromedp.Click(chromedp.CSS(`#reconcile-form button[type=submit]`)))
	p.waitFor(`document.querySelector(".findings") && /2 → —/.test(document.querySelector(".findings").innerText)`, 10*time.Second)
	p.do(chromedp.SetValue(chromedp.CSS("#rec-sku"), "flash-1"), chromedp.Click(chromedp.CSS("#rec-repair")),
		chromedp.Click(chromedp.CSS(`#reconcile-form button[type=submit]`)))
	p.waitFor(`document.getElementById("repair-dialog").open`, 5*time.Second)
	p.do(chromedp.Click(chromedp.CSS("#repair-confirm")))
	p.waitFor(`document.querySelector(".findings") && /2 → 7/.test(document.querySelector(".findings").innerText)`, 10*time.Second)
	p.check("reconciliation")
	want(t, "repaired", call(t, "GET", base+"/v1/skus/flash-1", conAu, ""), 200, `"redis_stock":7`)
	p.open("/console/health")
	p.waitFor(`document.getElementById("h-redis").textContent === "reachable"`, 5*time.Second)
	p.check("health")

	// Sign-out ends the session: the old cookie, put back, is refused.
	old := p.sessionCookie()
	if old == nil || !old.HTTPOnly || old.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie %+v, want HttpOnly and SameSite=Strict", old)
	}
	p.signOut()
	p.setCookie(old)
	p.open("/console/health")
	if got := p.path(); got != "/console/signin" {
		t.Fatalf("the cookie of a signed-out session opened %s", got)
	}

	// Idle: a serve with a 2 s idle timeout refuses the cookie after 3 s.
	p.base = idleBase
	p.signIn(conAu)
	p.open("/console/health")
	if got := p.path(); got != "/console/health" {
		t.Fatalf("fresh session opened %s", got)
	}
	time.Sleep(3 * time.Second)
	p.open("/console/health")
	if got := p.path(); got != "/console/signin" {
		t.Fatalf("after the idle timeout the cookie opened %s", got)
	}
	t.Logf("browser test took %v", time.Since(began).Round(time.Millisecond))
}
