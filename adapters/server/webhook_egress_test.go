package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

// webhookServe is what the tests of this file serve: the API, and the
// projector, which delivers webhooks, retrying quickly.
var webhookServe = Config{Components: []string{ComponentAPI, ComponentProjector}, Tokens: conTokens, ConsoleKey: conKey,
	WebhookMinBackoff: childWebhookMinBackoff, WebhookMaxBackoff: childWebhookMaxBackoff}

// failedAttempts reads invledger_event_webhook_attempts_total{result="failed"}
// from the API's /metrics.
func failedAttempts(t *testing.T, api string) int {
	t.Helper()
	a := call(t, "GET", api+"/metrics", "", "")
	m := regexp.MustCompile(`(?m)^invledger_event_webhook_attempts_total\{result="failed"\} (\d+)$`).FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("/metrics has no failed webhook attempts counter:\n%.2000s", a.body)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// redirector is a real receiver that answers every request 307 to target
// and remembers the webhook-id of each.
type redirector struct {
	mu  sync.Mutex
	ids []string
}

func newRedirector(t *testing.T, target string) (*redirector, string) {
	r := &redirector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.ids = append(r.ids, req.Header.Get(standardwebhooks.HeaderWebhookID))
		r.mu.Unlock()
		http.Redirect(w, req, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *redirector) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// TestWebhooksReachNoInternalAddress serves a stack whose allow-list is
// empty, as serve's is by default: a subscription to an internal address,
// in any spelling (an IPv6 form carrying an internal IPv4 address among
// them), to a special-use address, or with user:password@, is 400 naming
// url and stores nothing, while one carrying a public IPv4 address is
// taken; a subscription the API never checked (one named localhost,
// written to the store as a subscription from before the rule would be,
// or a name whose DNS answer changed) is listed without its
// user:password@ and refused by the dialer, and its
// receiver on 127.0.0.1 sees no request while failed attempts are
// counted. Then a process that allows 127.0.0.0/8 delivers to it, and a
// receiver answering 307 to another receiver is a failed attempt, retried,
// whose target never gets the signed body.
func TestWebhooksReachNoInternalAddress(t *testing.T) {
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.WebhookAllowNets = nil }))
	recv := newWebhookReceiver(t)
	_, port, _ := net.SplitHostPort(recv.addr)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	recv.verifier.Store(verifier)

	t.Run("refused", func(t *testing.T) {
		api := startServe(t, st, webhookServe)
		for _, u := range []string{"http://127.0.0.1:" + port + "/hooks", "http://localhost:" + port + "/hooks", "http://[::1]:9/hooks",
			"http://127.1:9/hooks", "http://2130706433:9/hooks", "http://0x7f000001:9/hooks", "http://169.254.169.254/latest/meta-data",
			"http://10.0.0.8/hooks", "http://[fd00::8]/hooks", "http://0.0.0.0:9/hooks", "http://224.0.0.1/hooks",
			"https://user:pass@shop.example/hooks",
			// IPv6 forms carrying an internal IPv4 address, and special-use IPv4.
			"http://[64:ff9b::a9fe:a9fe]/latest/meta-data", "http://[64:ff9b:1::a9fe:a9fe]/", "http://[2002:7f00:1::1]:" + port + "/hooks",
			"http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/hooks", "http://[::ffff:0:7f00:1]:" + port + "/hooks",
			"http://198.18.0.1/hooks", "http://240.0.0.1/hooks", "http://192.0.0.8/hooks", "http://192.0.2.1/hooks"} {
			want(t, "subscribe "+u, call(t, "POST", api+"/v1/webhooks", conOp, `{"url":"`+u+`","event_types":["deducted"]}`), 400, `"field":"url"`)
		}
		// Forms carrying a globally reachable IPv4 address are subscribed
		// (and ended at once: nothing is to be sent to the internet).
		for _, u := range []string{"http://[64:ff9b::8.8.8.8]/hooks", "http://[2002:0808:0808::1]/hooks"} {
			a := call(t, "POST", api+"/v1/webhooks", conOp, `{"url":"`+u+`","event_types":["deducted"]}`)
			want(t, "subscribe "+u, a, 201)
			var sub struct{ ID string }
			if err := json.Unmarshal([]byte(a.body), &sub); err != nil || sub.ID == "" {
				t.Fatalf("subscribe %s: %s: %v", u, a.body, err)
			}
			want(t, "end "+u, call(t, "DELETE", api+"/v1/webhooks/"+sub.ID, conOp, ""), 204)
		}
		want(t, "list after the refusals", call(t, "GET", api+"/v1/webhooks", conOp, ""), 200, `{"webhooks":[]}`)

		// With user:password@, as only the store takes it: the list never shows it.
		if err := approot.Of(st.App).Adapters.Webhooks.CreateWebhook(ctx, domain.WebhookSubscription{ID: "wh_by_name", URL: "http://olga:pw-123@localhost:" + port + "/hooks",
			EventTypes: []string{"deducted"}, Secret: secret, CreatedBy: "olga", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if l := call(t, "GET", api+"/v1/webhooks", conOp, ""); strings.Contains(l.body, "pw-123") || !strings.Contains(l.body, `"url":"http://localhost:`+port+`/hooks"`) {
			t.Fatalf("the list shows the URL's user:password@, or not the URL: %s", l.body)
		}
		createWarm(t, api, "eg-1", `{"stock":5,"per_user_limit":5}`)
		want(t, "deduct", call(t, "POST", api+"/v1/skus/eg-1/deduct", conGW, `{"user_id":"u1","qty":1,"request_id":"r1"}`), 200)
		localstacktest.WaitFor(t, "failed attempts to reach localhost", 20*time.Second, func() bool { return failedAttempts(t, api) >= 3 })
		if n := recv.count(); n != 0 {
			t.Fatalf("the receiver on 127.0.0.1 got %d messages through the name localhost", n)
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		if recv.requests != 0 {
			t.Fatalf("the receiver on 127.0.0.1 saw %d requests", recv.requests)
		}
	})

	t.Run("allowed", func(t *testing.T) {
		cfg := st.App.Config()
		cfg.Registry, cfg.WebhookAllowNets = nil, []string{"127.0.0.0/8"}
		allowing, err := app.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(allowing.Close)
		api := startServeApp(t, allowing, webhookServe)
		recv.waitCount(t, 1, 20*time.Second) // the deduct held back above

		target := newWebhookReceiver(t)
		target.verifier.Store(verifier)
		redir, redirURL := newRedirector(t, "http://"+target.addr+"/stolen")
		want(t, "subscribe the redirector", call(t, "POST", api+"/v1/webhooks", conOp, `{"url":"`+redirURL+`/hooks","event_types":["deducted"]}`), 201)
		before := failedAttempts(t, api)
		want(t, "deduct", call(t, "POST", api+"/v1/skus/eg-1/deduct", conGW, `{"user_id":"u2","qty":1,"request_id":"r2"}`), 200)
		recv.waitCount(t, 2, 20*time.Second)
		localstacktest.WaitFor(t, "the redirector asked three times", 20*time.Second, func() bool { return len(redir.requests()) >= 3 })
		ids := redir.requests()
		if ids[0] == "" || ids[0] != ids[1] || ids[1] != ids[2] {
			t.Fatalf("the redirector saw webhook-ids %q: want one message retried", ids)
		}
		if n := failedAttempts(t, api) - before; n < 3 {
			t.Fatalf("%d failed attempts counted for 3 redirects", n)
		}
		target.mu.Lock()
		defer target.mu.Unlock()
		if target.requests != 0 {
			t.Fatalf("the redirect's target got %d requests with the signed body", target.requests)
		}
	})
}

// TestHoldEventWebhooksCarryTheHold serves holds ended every way (confirmed,
// cancelled, expired) and an order's line: each hold event's delivery
// carries hold_id and expires_at as the API answered them, and order_id for
// the order's line; a deduct's delivery carries none of the three.
func TestHoldEventWebhooksCarryTheHold(t *testing.T) {
	st := stacktest.New(t)
	api := startServe(t, st, webhookServe)
	recv := newWebhookReceiver(t)
	created := call(t, "POST", api+"/v1/webhooks", conOp,
		`{"url":"http://`+recv.addr+`/hooks","event_types":["deducted","reserved","confirmed","cancelled","expired"]}`)
	want(t, "subscribe", created, 201)
	var sub struct{ Secret string }
	if err := json.Unmarshal([]byte(created.body), &sub); err != nil {
		t.Fatal(err)
	}
	verifier, err := standardwebhooks.NewWebhook(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	recv.verifier.Store(verifier)
	createWarm(t, api, "hw-1", `{"stock":10,"per_user_limit":10}`)

	type hold struct {
		HoldID    string    `json:"hold_id"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	reserve := func(req string, ttl int) hold {
		t.Helper()
		a := call(t, "POST", api+"/v1/skus/hw-1/holds", conGW, fmt.Sprintf(`{"user_id":"u1","qty":1,"request_id":%q,"ttl_seconds":%d}`, req, ttl))
		want(t, "reserve "+req, a, 201)
		var h hold
		if err := json.Unmarshal([]byte(a.body), &h); err != nil || h.HoldID == "" {
			t.Fatalf("reserve answer %s: %v", a.body, err)
		}
		return h
	}
	holds := map[string]hold{} // what each hold's events must carry, by hold_id
	orderOf := map[string]string{}
	for _, c := range []struct{ req, end string }{{"h-confirm", "confirm"}, {"h-cancel", "cancel"}, {"h-expire", ""}} {
		ttl := 600
		if c.end == "" {
			ttl = 1
		}
		h := reserve(c.req, ttl)
		holds[h.HoldID] = h
		if c.end != "" {
			want(t, c.end, call(t, "POST", api+"/v1/skus/hw-1/holds/"+h.HoldID+"/"+c.end, conGW, ""), 200)
		}
	}
	placed := call(t, "POST", api+"/v1/orders", conGW, `{"order_id":"o-hw","user_id":"u2","ttl_seconds":600,"lines":[{"sku":"hw-1","qty":2}]}`)
	want(t, "place the order", placed, 201)
	var order struct {
		ExpiresAt time.Time `json:"expires_at"`
		Lines     []hold    `json:"lines"`
	}
	if err := json.Unmarshal([]byte(placed.body), &order); err != nil || len(order.Lines) != 1 {
		t.Fatalf("order answer %s: %v", placed.body, err)
	}
	line := hold{HoldID: order.Lines[0].HoldID, ExpiresAt: order.ExpiresAt}
	holds[line.HoldID], orderOf[line.HoldID] = line, "o-hw"
	want(t, "confirm the order", call(t, "POST", api+"/v1/orders/o-hw/confirm", conGW, ""), 200)
	want(t, "deduct", call(t, "POST", api+"/v1/skus/hw-1/deduct", conGW, `{"user_id":"u3","qty":1,"request_id":"d-1"}`), 200)

	// 4 reserved, 2 confirmed, 1 cancelled, 1 expired, 1 deducted.
	recv.waitCount(t, 9, 30*time.Second)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	types := map[string]int{}
	for id, body := range recv.bodies {
		var p struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		typ, _ := p.Data["type"].(string)
		types[typ]++
		if typ == "deducted" {
			for _, k := range []string{"hold_id", "order_id", "expires_at"} {
				if _, ok := p.Data[k]; ok {
					t.Errorf("deducted %s carries %s: %s", id, k, body)
				}
			}
			continue
		}
		holdID, _ := p.Data["hold_id"].(string)
		h, ok := holds[holdID]
		if !ok {
			t.Errorf("%s %s carries hold_id %q, not one of the holds made: %s", typ, id, holdID, body)
			continue
		}
		at, _ := p.Data["expires_at"].(string)
		if got, err := time.Parse(time.RFC3339Nano, at); err != nil || !got.Equal(h.ExpiresAt) {
			t.Errorf("%s of hold %s carries expires_at %q, the API answered %s", typ, holdID, at, h.ExpiresAt)
		}
		if got, _ := p.Data["order_id"].(string); got != orderOf[holdID] {
			t.Errorf("%s of hold %s carries order_id %q, want %q", typ, holdID, got, orderOf[holdID])
		}
	}
	if fmt.Sprint(types) != "map[cancelled:1 confirmed:2 deducted:1 expired:1 reserved:4]" {
		t.Errorf("delivered types %v", types)
	}
}
