package alertwebhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/webhooks/egress"
	"github.com/invledger/invledger/ledger/reconcile"
)

func TestWebhookReceivesOneAlertPerFindingWithTheDocumentedSchema(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []map[string]any
		hits int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hits++
		if hits == 1 { // the first delivery fails: it must be retried
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("bad alert body: %v", err)
		}
		got = append(got, body)
	}))
	defer srv.Close()
	m := NewMetrics(prometheus.NewRegistry())
	n, err := NewWebhookNotifier(Config{URL: srv.URL, Client: loopbackClient(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	stock := int64(9)
	n.Alert(ctx, reconcile.Finding{SKU: "a", Class: reconcile.ClassRedisHigh, Detail: "d", Before: reconcile.Figures{RedisStock: &stock, TruthStock: 7}})
	n.Alert(ctx, reconcile.Finding{SKU: "b", Class: reconcile.ClassBalancesDrift, Detail: "d", Repaired: true})
	n.DeadLetter(ctx, "inv:{p01}:events", "1-1", "missing seq")
	n.Fenced(ctx, 3)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		// The receiver records an alert before its answer reaches the
		// notifier, which counts the delivery only then: wait for both.
		if k == 4 && testutil.ToFloat64(m.deliveries.WithLabelValues("delivered")) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d alerts, counted %v delivered, want 4", k, testutil.ToFloat64(m.deliveries.WithLabelValues("delivered")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	first := got[0]
	finding, _ := first["finding"].(map[string]any)
	before, _ := finding["before"].(map[string]any)
	if first["kind"] != "reconciliation_finding" || first["severity"] != "critical" || first["at"] == nil ||
		finding["sku"] != "a" || finding["class"] != "redis_high" || before["redis_stock"] != float64(9) || before["truth_stock"] != float64(7) {
		t.Fatalf("alert does not follow the schema: %v", first)
	}
	if got[1]["severity"] != "warning" {
		t.Fatalf("second alert %v", got[1])
	}
	if dl, _ := got[2]["dead_letter"].(map[string]any); got[2]["kind"] != "dead_letter" || dl["stream_id"] != "1-1" || dl["reason"] != "missing seq" {
		t.Fatalf("dead letter alert %v", got[2])
	}
	if f, _ := got[3]["fenced"].(map[string]any); got[3]["kind"] != "fenced_skus" || f["count"] != float64(3) {
		t.Fatalf("fenced alert %v", got[3])
	}
	if v := testutil.ToFloat64(m.deliveries.WithLabelValues("delivered")); v != 4 {
		t.Fatalf("delivered counter %v, want 4", v)
	}
}

// loopbackClient reaches the tests' receivers on 127.0.0.1, which the
// default client refuses.
func loopbackClient() *http.Client {
	return egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).Client()
}

// deliverOne runs n for one alert until its delivery is counted as result
// (delivered or failed), then stops it.
func deliverOne(t *testing.T, n *WebhookNotifier, m *Metrics, result string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	n.Fenced(ctx, 1)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(m.deliveries.WithLabelValues(result)) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the alert was not counted %s (delivered %v, failed %v)", result,
				testutil.ToFloat64(m.deliveries.WithLabelValues("delivered")), testutil.ToFloat64(m.deliveries.WithLabelValues("failed")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// TestAlertsReachNoInternalAddressAndFollowNoRedirect: by default an alert
// for a receiver on 127.0.0.1, named localhost so that only the dialer sees
// the address, never arrives; with loopback allowed, a receiver's 307 is a
// failed delivery whose target never gets the alert.
func TestAlertsReachNoInternalAddressAndFollowNoRedirect(t *testing.T) {
	var hits, targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { targetHits.Add(1) }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	for _, tc := range []struct {
		name   string
		url    string
		client *http.Client
		hits   int64
	}{
		{"default client, localhost", "http://localhost:" + u.Port() + "/alerts", nil, 0},
		{"loopback allowed, 307", srv.URL, loopbackClient(), 1},
	} {
		hits.Store(0)
		m := NewMetrics(prometheus.NewRegistry())
		n, err := NewWebhookNotifier(Config{URL: tc.url, Client: tc.client, Attempts: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		deliverOne(t, n, m, "failed")
		if hits.Load() != tc.hits || targetHits.Load() != 0 {
			t.Fatalf("%s: receiver saw %d requests (want %d), the redirect's target %d (want 0)", tc.name, hits.Load(), tc.hits, targetHits.Load())
		}
	}
}

func TestHangingWebhookNeverBlocksTheReconciler(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	m := NewMetrics(prometheus.NewRegistry())
	n, err := NewWebhookNotifier(Config{URL: srv.URL, Client: loopbackClient(), Timeout: 200 * time.Millisecond, Attempts: 2, QueueSize: 10,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.Run(ctx)
	// 1,000 alerts against a webhook that never answers: had Alert waited
	// for delivery or for queue space, it would hang here and nothing
	// would be dropped.
	for range 1000 {
		n.Alert(ctx, reconcile.Finding{SKU: "s", Class: reconcile.ClassRedisLow})
	}
	if dropped := testutil.ToFloat64(m.deliveries.WithLabelValues("dropped")); dropped < 900 {
		t.Fatalf("dropped %v alerts, want the overflow beyond the queue counted", dropped)
	}
}

// TestWebhookJSONIsPinned pins the webhook body byte for byte: receivers
// parse these keys, so a renamed Go field must never change them.
func TestWebhookJSONIsPinned(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	a, b, c, d, e := int64(9), int64(4), int64(12), int64(7), int64(3)
	full := reconcile.Finding{SKU: "phone-x", Class: reconcile.ClassRedisHigh, Detail: "d",
		Before: reconcile.Figures{RedisStock: &a, RedisSeq: &b, RedisBuyers: &c, LedgerStock: 7, LedgerSeq: 4, LedgerCount: 5, Holders: 2,
			InFlight: 1, InFlightSum: -1, TruthStock: 6, TruthSeq: 5, BalanceStock: &d, BalanceSeq: &e},
		After:       &reconcile.Figures{TruthStock: 6},
		MissingSeqs: []reconcile.SeqRange{{From: 3, To: 4}},
		Lost:        []reconcile.LostReceipt{{Seq: 101, EventID: "e", RequestID: "r", User: "u", Qty: 1}},
		Repaired:    true, RepairError: "boom"}
	bare := reconcile.Finding{SKU: "s", Class: reconcile.ClassRedisMissing}
	for _, tc := range []struct {
		alert webhookAlert
		want  string
	}{
		{webhookAlert{Kind: "reconciliation_finding", Severity: severity(full), At: at, Finding: newWebhookFinding(full)},
			`{"kind":"reconciliation_finding","severity":"critical","at":"2026-11-29T12:00:00Z","finding":{"sku":"phone-x","class":"redis_high","detail":"d","before":{"redis_stock":9,"redis_seq":4,"redis_buyers":12,"ledger_stock":7,"ledger_seq":4,"ledger_count":5,"ledger_holders":2,"in_flight":1,"in_flight_delta":-1,"truth_stock":6,"truth_seq":5,"balance_stock":7,"balance_seq":3},"after":{"redis_stock":null,"redis_seq":null,"ledger_stock":0,"ledger_seq":0,"ledger_count":0,"ledger_holders":0,"in_flight":0,"in_flight_delta":0,"truth_stock":6,"truth_seq":0},"missing_seqs":[{"from":3,"to":4}],"lost":[{"seq":101,"event_id":"e","request_id":"r","user_id":"u","qty":1}],"repaired":true,"repair_error":"boom"}}`},
		{webhookAlert{Kind: "reconciliation_finding", Severity: severity(bare), At: at, Finding: newWebhookFinding(bare)},
			`{"kind":"reconciliation_finding","severity":"warning","at":"2026-11-29T12:00:00Z","finding":{"sku":"s","class":"redis_missing","detail":"","before":{"redis_stock":null,"redis_seq":null,"ledger_stock":0,"ledger_seq":0,"ledger_count":0,"ledger_holders":0,"in_flight":0,"in_flight_delta":0,"truth_stock":0,"truth_seq":0},"repaired":false}}`},
		{webhookAlert{Kind: "dead_letter", Severity: "critical", At: at, DeadLetter: &webhookDeadLetter{Stream: "s", StreamID: "1-1", Reason: "r"}},
			`{"kind":"dead_letter","severity":"critical","at":"2026-11-29T12:00:00Z","dead_letter":{"stream":"s","stream_id":"1-1","reason":"r"}}`},
		{webhookAlert{Kind: "fenced_skus", Severity: "critical", At: at, Fenced: &webhookFenced{Count: 3}},
			`{"kind":"fenced_skus","severity":"critical","at":"2026-11-29T12:00:00Z","fenced":{"count":3}}`},
	} {
		got, err := json.Marshal(tc.alert)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("webhook body\n got %s\nwant %s", got, tc.want)
		}
	}
}

// TestSignedAlertsVerifyTheStandardWebhooksWay: with a secret, every
// delivery carries webhook-id, webhook-timestamp and webhook-signature,
// which the Standard Webhooks library verifies with the same secret and
// refuses with another; a retried delivery keeps its webhook-id.
func TestSignedAlertsVerifyTheStandardWebhooksWay(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	good, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	other, err := standardwebhooks.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret, not ours")))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		ids []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := good.Verify(body, r.Header); err != nil {
			t.Errorf("a delivery does not verify: %v (%v)", err, r.Header)
		}
		if err := other.Verify(body, r.Header); err == nil {
			t.Error("a delivery verifies with another secret")
		}
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get("webhook-id"))
		if len(ids) == 1 { // the first attempt fails: the retry keeps the id
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	m := NewMetrics(prometheus.NewRegistry())
	n, err := NewWebhookNotifier(Config{URL: srv.URL, Client: loopbackClient(), Secret: secret, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	deliverOne(t, n, m, "delivered")
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("webhook-ids %q: want one id, kept across the retry", ids)
	}
	if _, err := NewWebhookNotifier(Config{URL: srv.URL, Secret: "not base64!", Metrics: m}); err == nil || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("a malformed secret = %v; want refused without being shown", err)
	}
}
