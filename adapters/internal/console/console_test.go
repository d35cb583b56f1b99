package console

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// memSessions is a SessionStore in memory: the tests here check the
// console's own logic; the PostgreSQL store is driven by server's.
type memSessions struct {
	mu    sync.Mutex
	ended map[string]bool
}

func (m *memSessions) Start(_ context.Context, id, _, _ string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended[id] = false
	return nil
}

func (m *memSessions) Active(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ended, ok := m.ended[id]
	return ok && !ended, nil
}

func (m *memSessions) End(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended[id] = true
	return nil
}

// events is a stand-in for the partition stream: Follow hands each
// watcher's tail what is sent on it.
type events struct {
	ch      chan domain.Event
	follows chan struct{}
}

func (e *events) follow(ctx context.Context, _ int, fn func(domain.Event) error) error {
	e.follows <- struct{}{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-e.ch:
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
}

func newTestConsole(t *testing.T, ev *events) *Console {
	t.Helper()
	tokens, err := httpapi.NewTokenSet([]httpapi.Token{{Name: "audrey", Role: httpapi.RoleAuditor, Secret: "auditor-secret-0001"}})
	if err != nil {
		t.Fatal(err)
	}
	stock := int64(10)
	c, err := New(Config{
		API: http.NotFoundHandler(), Tokens: tokens, Sessions: &memSessions{ended: map[string]bool{}}, Key: GenerateKey(),
		Follow: ev.follow, Partition: func(string) int { return 0 },
		State: func(context.Context, string) (ledger.SKUView, error) {
			return ledger.SKUView{RedisStock: &stock, Status: domain.StatusOpen}, nil
		},
		Health:   func(context.Context) Health { return Health{} },
		Refusals: func(context.Context, string) (map[string]int64, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestFeedOutlivesTheServerTimeouts: a feed runs past the server's read
// and write timeouts, which end any other response, and one watcher that
// reads nothing never holds up the reader or the other watchers.
func TestFeedOutlivesTheServerTimeouts(t *testing.T) {
	ev := &events{ch: make(chan domain.Event), follows: make(chan struct{}, 10)}
	c := newTestConsole(t, ev)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: c, ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(base+"/console/signin", url.Values{"token": {"auditor-secret-0001"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	open := func(sku string) (*http.Response, *bufio.Reader) {
		t.Helper()
		resp, err := client.Get(base + "/console/skus/" + sku + "/feed")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("feed = %d", resp.StatusCode)
		}
		return resp, bufio.NewReader(resp.Body)
	}
	stuck, _ := open("s-1") // never read
	defer stuck.Body.Close()
	reader, lines := open("s-1")
	defer reader.Body.Close()
	other, _ := open("s-2")
	defer other.Body.Close()
	<-ev.follows
	select {
	case <-ev.follows:
		t.Fatal("watchers of two SKUs of one partition started two readers")
	case <-time.After(100 * time.Millisecond):
	}

	// Well past both timeouts, thousands of events in batches the reading
	// watcher takes in turn: far more than the stuck watcher's buffer and
	// its socket buffers hold, so a reader that waited for it would stop.
	time.Sleep(time.Second)
	got := make(chan string, 1024)
	go func() {
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				close(got)
				return
			}
			got <- line
		}
	}()
	const batches, size = 50, 100
	for b := range batches {
		for i := range size {
			e := domain.Event{ID: "e", Type: domain.EventDeducted, SKU: "s-1", Seq: int64(b*size + i + 1), Reason: strings.Repeat("x", 200)}
			select {
			case ev.ch <- e:
			case <-time.After(5 * time.Second):
				t.Fatalf("the reader stopped taking events at seq %d", e.Seq)
			}
		}
		last := fmt.Sprintf(`"seq":%d,`, (b+1)*size)
		for found := false; !found; {
			select {
			case line, ok := <-got:
				if !ok {
					t.Fatalf("the feed ended in batch %d", b)
				}
				found = strings.Contains(line, last)
			case <-time.After(5 * time.Second):
				t.Fatalf("the reading watcher did not get seq %d", (b+1)*size)
			}
		}
	}
}

func TestChainStatus(t *testing.T) {
	e := func(seq int64, prev, hash string) wire.AuditEntryJSON {
		return wire.AuditEntryJSON{EventJSON: wire.EventJSON{Seq: seq}, PrevHash: prev, Hash: hash}
	}
	for _, tc := range []struct {
		name   string
		events []wire.AuditEntryJSON
		after  int64
		want   []string
	}{
		{"from the start", []wire.AuditEntryJSON{e(1, "", "a"), e(2, "a", "b"), e(3, "b", "")}, 0, []string{"linked", "linked", "not sealed yet"}},
		{"a break", []wire.AuditEntryJSON{e(1, "", "a"), e(2, "x", "b"), e(3, "b", "c")}, 0, []string{"linked", "break", "linked"}},
		{"page after 1 reads 1 for the link", []wire.AuditEntryJSON{e(1, "", "a"), e(2, "z", "b")}, 1, []string{"break"}},
		{"page after 1, linked", []wire.AuditEntryJSON{e(1, "", "a"), e(2, "a", "b")}, 1, []string{"linked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := chainStatus(tc.events, tc.after)
			var got []string
			for _, r := range rows {
				got = append(got, r.Chain)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzSafeNext: wherever a sign-in says to go next, it stays in the console.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/console/sales", "//evil.example/x", "/console/../x", "https://evil.example", "/console/\\evil", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		u, err := url.Parse(got)
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(got, Prefix) || strings.ContainsAny(got, "\\\r\n") {
			t.Fatalf("safeNext(%q) = %q: leaves the console", next, got)
		}
	})
}

// TestCookieIsSecureUnderTLS: served over TLS, the session cookie is
// Secure (as well as HttpOnly and SameSite=Strict), and the browser sends
// it back over TLS.
func TestCookieIsSecureUnderTLS(t *testing.T) {
	c := newTestConsole(t, &events{ch: make(chan domain.Event), follows: make(chan struct{}, 10)})
	srv := httptest.NewTLSServer(c)
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.PostForm(srv.URL+"/console/signin", url.Values{"token": {"auditor-secret-0001"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == cookieName {
			session = ck
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("sign-in over TLS = %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if !session.Secure || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie over TLS: Secure %v HttpOnly %v SameSite %v; want all set, Strict",
			session.Secure, session.HttpOnly, session.SameSite)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/console/health", nil)
	req.AddCookie(session)
	page, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != 200 {
		t.Fatalf("a page with the cookie over TLS = %d", page.StatusCode)
	}
}
