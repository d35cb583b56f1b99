package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// specClient calls a serve over real HTTP and holds every request and
// answer to docs/openapi.yaml: the answer always (its status must be one
// the operation documents), the request when it succeeded (the refused
// ones are refused because they break it).
type specClient struct {
	t       *testing.T
	base    string
	router  routers.Router
	covered map[string]bool // operationId → answered 2xx
	// console keeps the console's session cookie, for /console/ paths.
	console *http.Client
}

func newSpecClient(t *testing.T, base string) *specClient {
	t.Helper()
	doc, err := httpapi.LoadOpenAPI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &specClient{t: t, base: base, router: router, covered: map[string]bool{}, console: &http.Client{Jar: jar,
		Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends method path with body (JSON, or nothing when empty) as the
// principal of secret, checks the exchange against the description and
// fails the test unless the status is want.
func (c *specClient) do(want int, method, path, secret, body string) answer {
	c.t.Helper()
	return c.doKey("", want, method, path, secret, body)
}

// doKey is do with an Idempotency-Key, when key is not empty.
func (c *specClient) doKey(key string, want int, method, path, secret, body string) answer {
	c.t.Helper()
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	console := strings.HasPrefix(path, "/console")
	switch {
	case console:
		// A form of the console's own page, sent with its session cookie.
		client = c.console
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	case body != "":
		req.Header.Set("Content-Type", "application/json")
	}
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	raw, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	got := answer{resp.StatusCode, resp.Header, string(raw)}
	if got.status != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, got.status, got.body, want)
	}

	// The validator reads the request's body again.
	req.Body = io.NopCloser(strings.NewReader(body))
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Errorf("%s %s: not in docs/openapi.yaml: %v", method, path, err)
		return got
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	op := route.Operation.OperationID
	// The console's forms answer with a redirect when they succeed.
	if got.status/100 == 2 || console && got.status/100 == 3 {
		c.covered[op] = true
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			c.t.Errorf("%s %s (%s): the request breaks docs/openapi.yaml: %v", method, path, op, err)
		}
	}
	if route.Operation.Extensions["x-invledger-response-validation"] == "exempt" {
		return got
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: got.status, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(raw)), Options: opts}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		c.t.Errorf("%s %s (%s) answered %d %s, which breaks docs/openapi.yaml: %v", method, path, op, got.status, got.body, err)
	}
	return got
}

// TestEveryRouteAnswersAsTheOpenAPIDescriptionSays drives every route of
// a real serve (API and projector over a private Redis and PostgreSQL),
// with successes and the documented refusals, and validates each request
// and answer against docs/openapi.yaml. Every operation it describes must
// have answered 2xx at least once, so a route added to the description
// without a test fails here, and one added to the handler without the
// description fails TestOpenAPIListsEveryRouteAndNoOther.
func TestEveryRouteAnswersAsTheOpenAPIDescriptionSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	const (
		gw, op, ap, au = "spec-gateway-secret-01", "spec-operator-secret-1", "spec-approver-secret-1", "spec-auditor-secret-01"
	)
	base := startServe(t, st, Config{
		Components: []string{ComponentAPI, ComponentProjector},
		Tokens:     "shop:gateway:" + gw + ",olga:operator:" + op + ",adam:approver:" + ap + ",audrey:auditor:" + au,
	})
	c := newSpecClient(t, base)

	c.do(200, "GET", "/healthz", "", "")
	c.do(200, "GET", "/readyz", "", "")
	c.do(200, "GET", "/metrics", "", "")
	c.do(200, "GET", "/v1/openapi.json", "", "")

	// Definition and warm-up.
	c.do(201, "PUT", "/v1/skus/spec-1", op, `{"stock":10,"per_user_limit":2}`)
	c.do(200, "PUT", "/v1/skus/spec-1", op, `{"stock":10,"per_user_limit":2}`)
	c.do(409, "PUT", "/v1/skus/spec-1", op, `{"stock":11,"per_user_limit":2}`)
	c.do(400, "PUT", "/v1/skus/spec-2", op, `{"per_user_limit":2}`)
	c.do(401, "PUT", "/v1/skus/spec-2", "", `{"stock":1}`)
	c.do(403, "PUT", "/v1/skus/spec-2", gw, `{"stock":1}`)
	c.do(200, "GET", "/v1/skus/spec-1", au, "")
	c.do(404, "GET", "/v1/skus/nope", au, "")
	c.do(400, "GET", "/v1/skus/bad%20id", au, "")
	c.do(404, "POST", "/v1/skus/nope/warm", op, "")
	c.do(200, "POST", "/v1/skus/spec-1/warm", op, "")
	c.doKey("create-spec-2", 201, "PUT", "/v1/skus/spec-2", op, `{"stock":1}`)
	c.doKey("create-spec-2", 201, "PUT", "/v1/skus/spec-2", op, `{"stock":1}`)
	c.doKey("create-spec-2", 422, "PUT", "/v1/skus/spec-2", op, `{"stock":2}`)
	c.do(200, "POST", "/v1/skus/spec-2/warm", op, "")

	// Purchases.
	c.do(200, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r1"}`)
	replay := c.do(200, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r1"}`)
	if replay.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a replay lacks Idempotent-Replayed: true: %v", replay.header)
	}
	c.doKey("r2", 200, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u2","qty":2,"request_id":"r2"}`)
	c.doKey("r2", 400, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u2","qty":2,"request_id":"other"}`)
	c.do(400, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u3","qty":0,"request_id":"r3"}`)
	c.do(400, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u3","qty":1}`)
	c.do(404, "POST", "/v1/skus/nope/deduct", gw, `{"user_id":"u3","qty":1,"request_id":"r3"}`)
	c.do(409, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u1","qty":2,"request_id":"r1"}`)
	c.do(200, "POST", "/v1/skus/spec-2/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r4"}`)
	c.do(409, "POST", "/v1/skus/spec-2/deduct", gw, `{"user_id":"u2","qty":1,"request_id":"r5"}`)
	c.do(403, "POST", "/v1/skus/spec-1/deduct", au, `{"user_id":"u3","qty":1,"request_id":"r3"}`)
	c.doKey("release-r1", 200, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u1","request_id":"r1","reason":"payment timeout"}`)
	c.do(200, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u1","request_id":"r1"}`)
	c.do(404, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u1","request_id":"never"}`)
	c.do(409, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u9","request_id":"r2"}`)
	c.do(400, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u1"}`)

	// Holds: confirmed and cancelled once each, however often asked.
	hold := func(a answer) string {
		var h struct {
			HoldID string `json:"hold_id"`
		}
		if err := json.Unmarshal([]byte(a.body), &h); err != nil || h.HoldID == "" {
			t.Fatalf("no hold_id in %s: %v", a.body, err)
		}
		return "/v1/skus/spec-1/holds/" + h.HoldID
	}
	h1 := hold(c.do(201, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h1","qty":1,"request_id":"h1","ttl_seconds":60}`))
	if again := c.do(201, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h1","qty":1,"request_id":"h1","ttl_seconds":60}`); hold(again) != h1 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a retried reserve answered %v %s, want hold %s replayed", again.header, again.body, h1)
	}
	c.do(200, "POST", hold(c.doKey("hk", 201, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"hk","qty":1,"request_id":"hk"}`))+"/cancel", gw, "")
	c.doKey("other", 400, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"hk","qty":1,"request_id":"hk"}`)
	c.do(400, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h9","qty":1,"request_id":"h9","ttl_seconds":0}`)
	c.do(400, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h9","qty":1,"request_id":"h9","ttl_seconds":3601}`)
	c.do(409, "POST", "/v1/skus/spec-2/holds", gw, `{"user_id":"h9","qty":1,"request_id":"h9"}`)
	c.do(403, "POST", "/v1/skus/spec-1/holds", au, `{"user_id":"h9","qty":1,"request_id":"h9"}`)
	c.do(200, "GET", h1, gw, "")
	c.do(200, "GET", h1, au, "")
	c.do(404, "GET", strings.Replace(h1, "spec-1", "spec-2", 1), au, "")
	c.do(400, "GET", "/v1/skus/spec-1/holds/not-a-uuid", au, "")
	c.do(200, "POST", h1+"/confirm", gw, "")
	c.do(200, "POST", h1+"/confirm", gw, "")
	c.do(409, "POST", h1+"/cancel", gw, "")
	c.do(403, "POST", h1+"/cancel", au, "")
	c.do(404, "POST", "/v1/skus/spec-1/holds/00000000-0000-4000-8000-000000000000/confirm", gw, "")
	h2 := hold(c.do(201, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h2","qty":1,"request_id":"h2"}`))
	c.do(200, "POST", h2+"/cancel", gw, "")
	c.do(200, "POST", h2+"/cancel", gw, "")
	c.do(409, "POST", h2+"/confirm", gw, "")

	// Orders: all lines or none; a refused line names itself and undoes the others.
	c.do(201, "PUT", "/v1/skus/spec-3", op, `{"stock":5,"per_user_limit":2}`)
	c.do(200, "POST", "/v1/skus/spec-3/warm", op, "")
	o1 := `{"order_id":"o1","user_id":"o1","ttl_seconds":60,"lines":[{"sku":"spec-1","qty":1},{"sku":"spec-3","qty":2}]}`
	if a := c.do(201, "POST", "/v1/orders", gw, o1); !strings.Contains(a.body, `"status":"held"`) {
		t.Errorf("order o1: %s", a.body)
	}
	c.do(200, "POST", "/v1/orders", gw, o1)
	if a := c.do(409, "POST", "/v1/orders", gw, strings.Replace(o1, `"qty":2`, `"qty":1`, 1)); !strings.Contains(a.body, `"field":"lines[1]"`) {
		t.Errorf("a retry of o1 with another line: %s", a.body)
	}
	c.do(400, "POST", "/v1/orders", gw, `{"order_id":"o9","user_id":"o9","lines":[]}`)
	c.do(400, "POST", "/v1/orders", gw, `{"order_id":"o9","user_id":"o9","lines":[{"sku":"spec-3","qty":1},{"sku":"spec-3","qty":1}]}`)
	c.do(400, "POST", "/v1/orders", gw, `{"order_id":"o9","user_id":"o9","ttl_seconds":0,"lines":[{"sku":"spec-3","qty":1}]}`)
	c.do(403, "POST", "/v1/orders", au, `{"order_id":"o9","user_id":"o9","lines":[{"sku":"spec-3","qty":1}]}`)
	a := c.do(409, "POST", "/v1/orders", gw, `{"order_id":"o2","user_id":"o2","lines":[{"sku":"spec-3","qty":1},{"sku":"spec-2","qty":1}]}`)
	if !strings.Contains(a.body, `"error":"sold_out"`) || !strings.Contains(a.body, `"field":"lines[1]"`) || !strings.Contains(a.body, "spec-2") {
		t.Errorf("order o2 refused on its sold-out line: %s", a.body)
	}
	if a := c.do(200, "GET", "/v1/orders/o2", au, ""); !strings.Contains(a.body, `"status":"cancelled"`) {
		t.Errorf("order o2's reserved line was not cancelled: %s", a.body)
	}
	c.do(200, "GET", "/v1/orders/o1", gw, "")
	c.do(404, "GET", "/v1/orders/nope", au, "")
	c.do(200, "POST", "/v1/orders/o1/confirm", gw, "")
	if a := c.do(200, "POST", "/v1/orders/o1/confirm", gw, ""); !strings.Contains(a.body, `"status":"confirmed"`) {
		t.Errorf("order o1 confirmed: %s", a.body)
	}
	c.do(409, "POST", "/v1/orders/o1/cancel", gw, "")
	c.do(403, "POST", "/v1/orders/o1/cancel", au, "")
	c.do(201, "POST", "/v1/orders", gw, `{"order_id":"o3","user_id":"o3","lines":[{"sku":"spec-3","qty":1}]}`)
	c.do(200, "POST", "/v1/orders/o3/cancel", gw, "")
	c.do(200, "POST", "/v1/orders/o3/cancel", gw, "")
	if a := c.do(409, "POST", "/v1/orders/o3/confirm", gw, ""); !strings.Contains(a.body, `"error":"hold_cancelled"`) {
		t.Errorf("a cancelled order confirmed: %s", a.body)
	}

	// Reads, once the ledger has caught up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var v struct {
			RedisSeq        *int64 `json:"redis_seq"`
			LedgerWatermark *int64 `json:"ledger_watermark"`
		}
		a := c.do(200, "GET", "/v1/skus/spec-1", au, "")
		if err := json.Unmarshal([]byte(a.body), &v); err != nil {
			t.Fatal(err)
		}
		if v.RedisSeq != nil && v.LedgerWatermark != nil && *v.RedisSeq == *v.LedgerWatermark {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger did not catch up with Redis: %s", a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.do(200, "GET", "/v1/skus?limit=1", au, "")
	c.do(400, "GET", "/v1/skus?limit=0", au, "")
	c.do(200, "GET", "/v1/skus/spec-1/events?after=1&limit=2", au, "")
	c.do(400, "GET", "/v1/skus/spec-1/events?after=x", au, "")
	c.do(200, "GET", "/v1/skus/spec-1/balance?at=now", au, "")
	c.do(400, "GET", "/v1/skus/spec-1/balance", au, "")
	c.do(200, "GET", "/v1/skus/spec-1/buyers?limit=10", au, "")
	c.do(200, "GET", "/v1/skus/spec-1/operations", au, "")
	c.do(200, "GET", "/v1/users/u1/purchases?limit=5", au, "")
	// A user's and a SKU's holds are in their histories, with hold_id.
	if a := c.do(200, "GET", "/v1/users/h1/purchases", au, ""); !strings.Contains(a.body, `"type":"confirmed"`) || !strings.Contains(a.body, `"hold_id"`) {
		t.Errorf("h1's history does not list the hold and its end: %s", a.body)
	}
	if a := c.do(200, "GET", "/v1/skus/spec-1/events?limit=100", au, ""); !strings.Contains(a.body, `"type":"cancelled"`) || !strings.Contains(a.body, `"expires_at"`) {
		t.Errorf("spec-1's history does not list the holds: %s", a.body)
	}
	c.do(400, "GET", "/v1/users/u1/purchases?limit=5000", au, "")

	// Reconciliation.
	c.do(200, "POST", "/v1/reconcile", op, "")
	c.doKey("reconcile-1", 200, "POST", "/v1/reconcile", op, `{"sku":"spec-1","repair":true}`)
	c.doKey("reconcile-1", 200, "POST", "/v1/reconcile", op, `{"sku":"spec-1","repair":true}`)
	c.do(404, "POST", "/v1/reconcile", op, `{"sku":"nope"}`)
	c.do(400, "POST", "/v1/reconcile", op, `{"sku":"spec-1","repair":"yes"}`)
	c.do(200, "GET", "/v1/reconciliations?limit=1", au, "")
	c.do(400, "GET", "/v1/reconciliations?limit=0", au, "")

	// Adjustments: an operator requests, someone else decides.
	c.doKey("adjust-1", 201, "POST", "/v1/adjustments", op, `{"sku":"spec-1","delta":5,"reason":"found a box"}`)
	c.doKey("adjust-1", 201, "POST", "/v1/adjustments", op, `{"sku":"spec-1","delta":5,"reason":"found a box"}`)
	c.do(201, "POST", "/v1/adjustments", op, `{"sku":"spec-1","delta":-1,"reason":"damaged"}`)
	c.do(400, "POST", "/v1/adjustments", op, `{"sku":"spec-1","reason":"no delta"}`)
	c.do(200, "GET", "/v1/adjustments?status=pending&sku=spec-1&limit=10", au, "")
	c.do(400, "GET", "/v1/adjustments?status=maybe", au, "")
	c.do(200, "POST", "/v1/adjustments/1/approve", ap, "")
	c.do(200, "POST", "/v1/adjustments/2/reject", ap, "")
	c.do(409, "POST", "/v1/adjustments/2/approve", ap, "")
	c.do(404, "POST", "/v1/adjustments/99/reject", ap, "")
	c.do(400, "POST", "/v1/adjustments/x/approve", ap, "")
	c.do(403, "POST", "/v1/adjustments/1/approve", op, "")

	// Dead letters: two entries the projector cannot read, and one it
	// projected already, as if it had failed on the way (replaying it is
	// idempotent by event id).
	stream := st.Keyspace.SKUStreamKey("spec-1")
	for range 2 {
		if err := st.RedisClient.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"type": "deducted", "sku": "spec-1"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := st.RedisClient.XRangeN(ctx, stream, "-", "+", 2).Result()
	if err != nil || len(entries) < 2 {
		t.Fatalf("XRANGE %s: %v %v", stream, entries, err)
	}
	projected := entries[1] // the first deduction
	fields := streamentry.EntryFields(projected.Values)
	fields[streamentry.StreamIDField] = projected.ID
	if _, err := st.Pool.Exec(ctx, `INSERT INTO dead_letters (stream, stream_id, fields, error) VALUES ($1, $2, $3, 'test')`,
		stream+":replayable", projected.ID, fields); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var page struct {
			DeadLetters []json.RawMessage `json:"dead_letters"`
		}
		a := c.do(200, "GET", "/v1/dead-letters?status=open&limit=10", op, "")
		if err := json.Unmarshal([]byte(a.body), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.DeadLetters) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the malformed entries were not dead-lettered: %s", a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.do(400, "GET", "/v1/dead-letters?status=lost", op, "")
	ids := map[bool][]int64{} // replayable → ids
	rows, err := st.Pool.Query(ctx, `SELECT id, stream LIKE '%:replayable' FROM dead_letters ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var replayable bool
		if err := rows.Scan(&id, &replayable); err != nil {
			t.Fatal(err)
		}
		ids[replayable] = append(ids[replayable], id)
	}
	if rows.Err() != nil || len(ids[true]) != 1 || len(ids[false]) != 2 {
		t.Fatalf("dead letters %v: %v", ids, rows.Err())
	}
	bad, good := ids[false][0], ids[true][0]
	c.do(409, "POST", fmt.Sprintf("/v1/dead-letters/%d/replay", bad), op, "")
	c.do(400, "POST", fmt.Sprintf("/v1/dead-letters/%d/resolve", bad), op, `{}`)
	c.do(200, "POST", fmt.Sprintf("/v1/dead-letters/%d/resolve", bad), op, `{"note":"written by hand in a test"}`)
	c.do(409, "POST", fmt.Sprintf("/v1/dead-letters/%d/replay", bad), op, "")
	c.do(200, "POST", fmt.Sprintf("/v1/dead-letters/%d/replay", good), op, "")
	c.do(404, "POST", "/v1/dead-letters/99/replay", op, "")

	// Business-event webhooks, managed by an operator. Nothing listens at
	// the URL: its deliveries fail and are retried until it is deleted.
	hook := `{"url":"http://127.0.0.1:9/hooks","event_types":["deducted","sold_out","closed"]}`
	created := c.doKey("webhook-1", 201, "POST", "/v1/webhooks", op, hook)
	c.doKey("webhook-1", 201, "POST", "/v1/webhooks", op, hook)
	c.do(400, "POST", "/v1/webhooks", op, `{"url":"ftp://127.0.0.1/hooks","event_types":["deducted"]}`)
	c.do(400, "POST", "/v1/webhooks", op, `{"url":"http://127.0.0.1:9/hooks","event_types":["stocked"]}`)
	c.do(403, "POST", "/v1/webhooks", gw, hook)
	c.do(200, "GET", "/v1/webhooks", op, "")
	c.do(403, "GET", "/v1/webhooks", au, "")
	var wh struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(created.body), &wh); err != nil || wh.ID == "" {
		t.Fatalf("webhook answer %s: %v", created.body, err)
	}
	c.do(200, "POST", "/v1/webhooks/"+wh.ID+"/rotate", op, "")
	c.do(404, "POST", "/v1/webhooks/wh_00000000-0000-4000-8000-000000000000/rotate", op, "")
	c.do(400, "POST", "/v1/webhooks/wh_nope/rotate", op, "")
	c.do(204, "DELETE", "/v1/webhooks/"+wh.ID, op, "")
	c.do(404, "DELETE", "/v1/webhooks/"+wh.ID, op, "")

	// The end of the sale.
	c.do(200, "POST", "/v1/skus/spec-1/close", op, "")
	c.do(200, "POST", "/v1/skus/spec-1/close", op, "")
	c.do(404, "POST", "/v1/skus/nope/close", op, "")
	c.do(409, "POST", "/v1/skus/spec-1/deduct", gw, `{"user_id":"u5","qty":1,"request_id":"r9"}`)
	c.do(409, "POST", "/v1/skus/spec-1/retire", op, "") // buyers not archived yet
	// The closed event reaches the ledger before the buyers can be archived.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := st.App.Archiver.ArchiveBuyers(ctx, "spec-1")
		if err == nil {
			break
		}
		if !errors.Is(err, ledger.ErrLedgerBehind) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	c.do(200, "POST", "/v1/skus/spec-1/retire", op, "")
	c.do(200, "POST", "/v1/skus/spec-1/retire", op, "")
	c.do(404, "POST", "/v1/skus/nope/retire", op, "")
	c.do(409, "POST", "/v1/skus/spec-1/release", gw, `{"user_id":"u2","request_id":"r2"}`)
	// A retired SKU's holds and orders are answered from the ledger, as its
	// purchases are: reads and repeats as before, new reserves closed.
	if a := c.do(200, "GET", h1, au, ""); !strings.Contains(a.body, `"status":"confirmed"`) {
		t.Errorf("a retired SKU's confirmed hold reads %s", a.body)
	}
	c.do(200, "POST", h1+"/confirm", gw, "")
	if a := c.do(409, "POST", h1+"/cancel", gw, ""); !strings.Contains(a.body, `"error":"hold_confirmed"`) {
		t.Errorf("cancel of a retired SKU's confirmed hold: %s", a.body)
	}
	if a := c.do(409, "POST", h2+"/confirm", gw, ""); !strings.Contains(a.body, `"error":"hold_cancelled"`) {
		t.Errorf("confirm of a retired SKU's cancelled hold: %s", a.body)
	}
	if again := c.do(201, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h1","qty":1,"request_id":"h1","ttl_seconds":60}`); hold(again) != h1 ||
		again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a retried reserve of a retired SKU answered %v %s, want hold %s replayed", again.header, again.body, h1)
	}
	if a := c.do(409, "POST", "/v1/skus/spec-1/holds", gw, `{"user_id":"h8","qty":1,"request_id":"h8"}`); !strings.Contains(a.body, `"error":"closed"`) {
		t.Errorf("a new reserve of a retired SKU: %s", a.body)
	}
	if a := c.do(200, "GET", "/v1/orders/o1", au, ""); !strings.Contains(a.body, `"status":"confirmed"`) {
		t.Errorf("an order with a retired SKU's line reads %s", a.body)
	}
	c.do(200, "POST", "/v1/orders", gw, o1)
	c.do(200, "POST", "/v1/orders/o1/confirm", gw, "")
	if a := c.do(409, "POST", "/v1/orders", gw, `{"order_id":"o8","user_id":"o8","lines":[{"sku":"spec-1","qty":1}]}`); !strings.Contains(a.body, `"error":"closed"`) ||
		!strings.Contains(a.body, `"field":"lines[0]"`) {
		t.Errorf("a new order of a retired SKU: %s", a.body)
	}
	c.do(200, "GET", "/v1/skus/spec-1", au, "")
	c.exerciseConsole(op, ap)

	for _, opID := range operationIDs(t) {
		if !c.covered[opID] {
			t.Errorf("operation %s of docs/openapi.yaml never answered 2xx here: add it to this test", opID)
		}
	}
}

// exerciseConsole drives every console route once, signed in as the
// operator of opSecret, then as the approver of apSecret.
func (c *specClient) exerciseConsole(opSecret, apSecret string) {
	c.t.Helper()
	c.do(303, "GET", "/console", "", "")
	c.do(200, "GET", "/console/assets/console.css", "", "")
	c.do(200, "GET", "/console/signin", "", "")
	c.do(303, "GET", "/console/sales", "", "")
	c.do(401, "POST", "/console/signin", "", url.Values{"token": {"not-a-token-at-all"}}.Encode())
	c.do(303, "POST", "/console/signin", "", url.Values{"token": {opSecret}, "next": {"/console/sales"}}.Encode())
	page := c.do(200, "GET", "/console/approvals", "", "")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)
	if m == nil {
		c.t.Fatalf("no csrf field on the approvals page: %.300s", page.body)
	}
	csrf := m[1]
	c.do(200, "GET", "/console/sales?sort=redis_stock&dir=desc&page=1", "", "")
	c.do(200, "GET", "/console/skus/spec-1?after=0&at=-1m", "", "")
	c.do(404, "GET", "/console/skus/nope", "", "")
	c.do(200, "GET", "/console/reconciliation", "", "")
	c.do(200, "GET", "/console/health", "", "")
	c.do(403, "POST", "/console/approvals", "", url.Values{"sku": {"spec-2"}, "delta": {"1"}, "reason": {"x"}}.Encode())
	c.do(303, "POST", "/console/approvals", "", url.Values{"csrf": {csrf}, "sku": {"spec-2"}, "delta": {"1"}, "reason": {"spec"}}.Encode())
	c.do(200, "POST", "/console/reconciliation", "", url.Values{"csrf": {csrf}, "repair": {"yes"}}.Encode())
	c.do(303, "POST", "/console/reconciliation", "", url.Values{"csrf": {csrf}, "sku": {"spec-2"}}.Encode())
	c.feed()
	c.do(303, "POST", "/console/signout", "", url.Values{"csrf": {csrf}}.Encode())
	c.do(401, "POST", "/console/signout", "", url.Values{"csrf": {csrf}}.Encode())

	c.do(303, "POST", "/console/signin", "", url.Values{"token": {apSecret}}.Encode())
	page = c.do(200, "GET", "/console/approvals", "", "")
	csrf = regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page.body)[1]
	ids := regexp.MustCompile(`action="/console/approvals/(\d+)/approve"`).FindStringSubmatch(page.body)
	if ids == nil {
		c.t.Fatalf("no pending adjustment to approve: %.2000s", page.body)
	}
	c.do(303, "POST", "/console/approvals/"+ids[1]+"/reject", "", url.Values{"csrf": {csrf}}.Encode())
}

// feed opens the live feed of spec-1 until its first message: it answers
// for as long as the watcher stays, so it cannot go through do.
func (c *specClient) feed() {
	c.t.Helper()
	req, err := http.NewRequest("GET", c.base+"/console/skus/spec-1/feed", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.console.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(line, "event: ") {
		c.t.Fatalf("feed = %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), line)
	}
	route, _, err := c.router.FindRoute(req)
	if err != nil {
		c.t.Fatalf("the feed is not in docs/openapi.yaml: %v", err)
	}
	c.covered[route.Operation.OperationID] = true
}

// operationIDs lists every operation the description holds.
func operationIDs(t *testing.T) []string {
	t.Helper()
	doc, err := httpapi.LoadOpenAPI(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			ids = append(ids, op.OperationID)
		}
	}
	return ids
}
