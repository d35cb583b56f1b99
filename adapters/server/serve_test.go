package server

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/httpapi/recovering"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Secrets of the test tokens.
const (
	secretGateway = "gateway-secret-000001"
	secretAuditor = "auditor-secret-000001"
	testTokens    = "shop:gateway:" + secretGateway + ",audrey:auditor:" + secretAuditor
)

// startServe runs Serve over st with sc (the API only unless sc says
// otherwise, on a free port) and returns the API's base URL. Serve stops
// when the test ends.
func startServe(t testing.TB, st *stacktest.Stack, sc Config) string {
	t.Helper()
	return startServeApp(t, st.App, sc)
}

// startServeApp is startServe over a, e.g. a second application on the
// same stack: another process, sharing nothing in memory.
func startServeApp(t testing.TB, a *app.Application, sc Config) string {
	t.Helper()
	if len(sc.Components) == 0 {
		sc.Components = []string{ComponentAPI}
	}
	sc.Listen = "127.0.0.1:0"
	if sc.DataDir == "" {
		sc.DataDir = t.TempDir()
	}
	listening := make(chan string, 1)
	sc.OnListening = func(addr string) { listening <- addr }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, a, sc) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
	})
	select {
	case addr := <-listening:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not listen")
	}
	return ""
}

type answer struct {
	status int
	header http.Header
	body   string
}

func call(t testing.TB, method, url, secret, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return send(t, req)
}

// TestReadinessFollowsRedisAndPostgresOutagesAreUnavailable stops
// PostgreSQL under a serving API: /readyz stays 200 and says postgres is
// unreachable without naming an address, purchases go on, a read that
// needs the ledger answers 503 with Retry-After, and the metrics show
// the outage. Without Redis /readyz is 503. A process without the API
// needs both.
func TestReadinessFollowsRedisAndPostgresOutagesAreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithPrivatePostgres())
	st.SKU(t, "ready-1", 10, 1)
	api := startServe(t, st, Config{Tokens: testTokens})

	if r := call(t, "GET", api+"/readyz", "", ""); r.status != 200 || r.body != `{"status":"ready","redis":"ok","postgres":"ok","recovering":"ok"}` {
		t.Fatalf("readyz with both up: %d %s", r.status, r.body)
	}
	if err := st.Postgres.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	r := call(t, "GET", api+"/readyz", "", "")
	if r.status != 200 || r.body != `{"status":"ready","redis":"ok","postgres":"unreachable","recovering":"ok"}` {
		t.Fatalf("readyz with postgres down: %d %s", r.status, r.body)
	}
	for _, secret := range []string{strconv.Itoa(st.Postgres.Port()), st.Redis.Addr(), "127.0.0.1", "postgres:", "refused"} {
		if strings.Contains(r.body, secret) {
			t.Fatalf("readyz body shows %q: %s", secret, r.body)
		}
	}
	if r := call(t, "POST", api+"/v1/skus/ready-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`); r.status != 200 {
		t.Fatalf("deduct with postgres down: %d %s", r.status, r.body)
	}
	r = call(t, "GET", api+"/v1/skus/ready-1", secretAuditor, "")
	if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"unavailable"`) {
		t.Fatalf("GET sku with postgres down: %d %v %s", r.status, r.header, r.body)
	}
	metrics := call(t, "GET", api+"/metrics", "", "").body
	for _, want := range []string{"\ninvledger_postgres_up 0\n", "\ninvledger_redis_up 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if rd := readiness(st.App, Config{Components: []string{ComponentProjector}})(ctx); rd.Ready {
		t.Fatalf("a projector-only process is ready without postgres: %+v", rd)
	}

	if err := st.Redis.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if r := call(t, "GET", api+"/readyz", "", ""); r.status != 503 ||
		r.body != `{"status":"not_ready","error":"not_ready","redis":"unreachable","postgres":"unreachable","recovering":"ok"}` {
		t.Fatalf("readyz with redis down: %d %s", r.status, r.body)
	}
	// A Redis that is down is unavailable, not a bug: 503 with Retry-After on
	// the purchase path and the SKU view alike.
	for _, c := range []struct{ method, path, secret, body string }{
		{"POST", "/v1/skus/ready-1/deduct", secretGateway, `{"user_id":"u2","qty":1,"request_id":"r2"}`},
		{"POST", "/v1/skus/ready-1/release", secretGateway, `{"user_id":"u1","request_id":"r1"}`},
	} {
		if r := call(t, c.method, api+c.path, c.secret, c.body); r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"unavailable"`) {
			t.Fatalf("%s %s with redis down: %d %v %s, want 503 unavailable with Retry-After", c.method, c.path, r.status, r.header, r.body)
		}
	}
}

// gaugeValue is the value of the unlabelled gauge name in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not registered", name)
	return 0
}

// TestReadinessReportsSKUsRecoveringTooLongAndStaysReady restarts Redis
// under an API that runs no reconciler, so its SKUs refuse as recovering
// until the test verifies them. One is verified and sells; two are
// retried past recovering.Bound: /readyz stays 200 and its "recovering"
// note counts them, and the gauges measure them, until a reserve is
// answered again and the last SKU's buyers stop retrying.
func TestReadinessReportsSKUsRecoveringTooLongAndStaysReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	for _, sku := range []string{"rec-stuck", "rec-held", "rec-fine"} {
		st.SKU(t, sku, 100, 10)
	}
	// The application's tracker reads the wall clock; this one reads a
	// clock the test moves, so a refusal of over two minutes takes none.
	start := time.Now()
	var moved atomic.Int64 // nanoseconds the test moved the clock on
	tracker, reg := recovering.New(func() time.Time { return start.Add(time.Duration(moved.Load())) }), prometheus.NewRegistry()
	tracker.Register(reg)
	approot.Of(st.App).Recovering = tracker
	api := startServe(t, st, Config{Tokens: testTokens})
	readyz := func(note string) {
		t.Helper()
		want := `{"status":"ready","redis":"ok","postgres":"ok","recovering":"` + note + `"}`
		if r := call(t, "GET", api+"/readyz", "", ""); r.status != 200 || r.body != want {
			t.Fatalf("readyz = %d %s, want 200 %s", r.status, r.body, want)
		}
	}
	deduct := func(sku, user string) answer {
		return call(t, "POST", api+"/v1/skus/"+sku+"/deduct", secretGateway, `{"user_id":"`+user+`","qty":1,"request_id":"`+sku+`-`+user+`"}`)
	}
	reserve := func() answer {
		return call(t, "POST", api+"/v1/skus/rec-held/holds", secretGateway, `{"user_id":"h1","qty":1,"request_id":"hold-1","ttl_seconds":600}`)
	}
	refused := func(what string, a answer) {
		t.Helper()
		want(t, what, a, 503, `"error":"recovering"`)
		if a.header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", what)
		}
	}
	readyz("ok")
	want(t, "deduct before the restart", deduct("rec-stuck", "u0"), 200)

	if err := st.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// The first calls may meet the connections Redis closed.
	localstacktest.WaitFor(t, "rec-stuck answering recovering", 10*time.Second, func() bool {
		a := deduct("rec-stuck", "u1")
		return a.status == 503 && strings.Contains(a.body, `"error":"recovering"`)
	})
	refused("reserve after the restart", reserve())
	if n := gaugeValue(t, reg, "invledger_recovering_skus"); n != 2 {
		t.Fatalf("invledger_recovering_skus = %g, want 2 (rec-stuck, rec-held)", n)
	}
	st.ProjectStreams(t)
	localstacktest.WaitFor(t, "rec-fine verified", 10*time.Second, func() bool {
		rep, err := st.App.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{"rec-fine"}, Repair: true, Trigger: "cli"})
		return err == nil && rep.Unverified == 0
	})

	// Buyers retry every 25 s; two and a half minutes later the two still
	// refuse, and rec-fine sells on the same pod.
	for range 6 {
		moved.Add(int64(25 * time.Second))
		refused("deduct of rec-stuck", deduct("rec-stuck", "u1"))
		refused("reserve of rec-held", reserve())
	}
	want(t, "deduct of rec-fine", deduct("rec-fine", "u1"), 200)
	readyz("2 skus over 2m0s")
	if n, longest := gaugeValue(t, reg, "invledger_recovering_skus"), gaugeValue(t, reg, "invledger_recovering_longest_seconds"); n != 2 || longest != 150 {
		t.Fatalf("invledger_recovering_skus = %g, invledger_recovering_longest_seconds = %g; want 2 and 150", n, longest)
	}

	localstacktest.WaitFor(t, "rec-held verified", 10*time.Second, func() bool {
		rep, err := st.App.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{"rec-held"}, Repair: true, Trigger: "cli"})
		return err == nil && rep.Unverified == 0
	})
	want(t, "reserve once verified", reserve(), 201)
	readyz("1 sku over 2m0s")
	// rec-stuck's buyers give up: past recovering.Forget it no longer counts.
	moved.Add(int64(recovering.Forget + time.Second))
	readyz("ok")
	if n := gaugeValue(t, reg, "invledger_recovering_skus"); n != 0 {
		t.Fatalf("invledger_recovering_skus = %g after every SKU answered or went quiet, want 0", n)
	}
}

// rawGet sends GET path on conn and reads the answer, leaving the
// connection open when the server keeps it alive.
func rawGet(t *testing.T, conn net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// logLines collects log messages, with their attributes, for a test to wait on.
type logLines struct {
	mu   sync.Mutex
	msgs []string
	seen chan struct{}
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	l.msgs = append(l.msgs, line)
	select {
	case l.seen <- struct{}{}:
	default:
	}
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// waitFor waits until a logged message contains want.
func (l *logLines) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		l.mu.Lock()
		for i, m := range l.msgs {
			if strings.Contains(m, want) {
				l.msgs = l.msgs[i+1:]
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-l.seen:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no log line %q", want)
		}
	}
}

// TestAProcessWithoutTheAPIServesMetricsAndHealth: a projector-only
// process answers /metrics, /healthz and /readyz on --listen, and nothing
// else.
func TestAProcessWithoutTheAPIServesMetricsAndHealth(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	ops := startServe(t, st, Config{Components: []string{ComponentProjector}})
	if r := call(t, "GET", ops+"/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", ops+"/readyz", "", ""); r.status != 200 || r.body != `{"status":"ready","redis":"ok","postgres":"ok"}` {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	if m := call(t, "GET", ops+"/metrics", "", "").body; !strings.Contains(m, "invledger_projection_batch_events") {
		t.Fatalf("/metrics lacks the projector's metrics: %.300s", m)
	}
	if r := call(t, "POST", ops+"/v1/skus/x/deduct", secretGateway, deductBody("u", "r")); r.status != 404 {
		t.Fatalf("deduct on a process without the API: %d %s, want 404", r.status, r.body)
	}
}
