package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestStrictInputIsRefusedNamingTheField sends a real serve what a hostile
// client would: cursors beyond 32 bits, path parameters that are not
// UTF-8 or hold NUL, bodies with invalid UTF-8 or lone surrogates in ids,
// repeated and case-folded keys inside order lines, and nulls. Each is
// answered as a 4xx naming the input (never 500), and none of them sells.
// A client re-serialising a keyed write on retry gets the replay, not 400.
// The one answer that is not the API's: a header holding a control
// character other than a tab, refused by Go's HTTP server itself.
func TestStrictInputIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	st.SKU(t, "strict-1", 10, 5)
	const op = "strict-operator-secret-1"
	api := startServe(t, st, Config{Components: []string{ComponentAPI, ComponentProjector},
		Tokens: testTokens + ",olga:operator:" + op})

	for _, c := range []struct {
		method, path, secret, body string
		status                     int
		field                      string // "" when the answer is not an error
	}{
		// Cursors are int64 on every listing.
		{"GET", "/v1/adjustments?after=2147483648", secretAuditor, "", 200, ""},
		{"GET", "/v1/adjustments?after=9223372036854775807", secretAuditor, "", 200, ""},
		{"GET", "/v1/reconciliations?after=2147483648", secretAuditor, "", 200, ""},
		{"GET", "/v1/dead-letters?after=2147483648", op, "", 200, ""},
		{"GET", "/v1/skus/strict-1/operations?after=2147483648", secretAuditor, "", 200, ""},
		{"GET", "/v1/dead-letters?after=0", op, "", 400, "after"},
		{"GET", "/v1/skus/strict-1/operations?after=0", secretAuditor, "", 400, "after"},
		{"GET", "/v1/skus/strict-1/events?after=-1", secretAuditor, "", 400, "after"},
		// Path parameters are checked before any store sees them.
		{"DELETE", "/v1/webhooks/a%00b", op, "", 400, "webhook_id"},
		{"POST", "/v1/webhooks/a%FFb/rotate", op, "", 400, "webhook_id"},
		{"GET", "/v1/users/a%FFb/purchases", secretAuditor, "", 400, "user_id"},
		{"GET", "/v1/users/a%00b/purchases", secretAuditor, "", 400, "user_id"},
		{"GET", "/v1/orders/a%FFb", secretAuditor, "", 400, "order_id"},
		{"POST", "/v1/orders/a%00b/cancel", secretGateway, "", 400, "order_id"},
		{"GET", "/v1/skus/a%FF/events", secretAuditor, "", 400, "sku"},
		{"POST", "/v1/dead-letters/a%FF/replay", op, "", 400, "id"},
		// Bytes that are not UTF-8, U+FFFD and lone surrogates in ids.
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, "{\"user_id\":\"u1\",\"qty\":1,\"request_id\":\"r\xff\"}", 400, "request_id"},
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, "{\"user_id\":\"u\xfe\",\"qty\":1,\"request_id\":\"r1\"}", 400, "user_id"},
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r\ud800"}`, 400, "request_id"},
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r\ufffd"}`, 400, "request_id"},
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, "{\"user_id\":\"u1\",\"qty\":1,\"request_id\":\"r\xef\xbf\xbd\"}", 400, "request_id"},
		{"POST", "/v1/skus/strict-1/release", secretGateway, "{\"user_id\":\"u1\",\"request_id\":\"r1\",\"reason\":\"\xc3\"}", 400, "reason"},
		{"POST", "/v1/orders", secretGateway, "{\"order_id\":\"o1\",\"user_id\":\"u1\",\"lines\":[{\"sku\":\"strict-1\",\"qty\":1},{\"sku\":\"s\xff\",\"qty\":1}]}", 400, "lines[1].sku"},
		// Order lines are as strict as the top level.
		{"POST", "/v1/orders", secretGateway, `{"order_id":"o1","user_id":"u1","lines":[{"sku":"strict-1","qty":1,"qty":3}]}`, 400, "lines[0].qty"},
		{"POST", "/v1/orders", secretGateway, `{"order_id":"o1","user_id":"u1","lines":[{"sku":"strict-1","QTY":1}]}`, 400, "body"},
		{"POST", "/v1/orders", secretGateway, `{"order_id":"o1","user_id":"u1","lines":[{"sku":"strict-1","qty":1},null]}`, 400, "lines[1]"},
		// null is not "absent".
		{"POST", "/v1/skus/strict-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":null}`, 400, "request_id"},
		{"POST", "/v1/skus/strict-1/holds", secretGateway, `{"user_id":"u1","qty":1,"request_id":"h1","ttl_seconds":null}`, 400, "ttl_seconds"},
		{"POST", "/v1/reconcile", op, `null`, 400, "body"},
	} {
		req, err := http.NewRequest(c.method, api+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+c.secret)
		if strings.Contains(c.body, "request_id\":null") {
			req.Header.Set("Idempotency-Key", "strict-key")
		}
		a := send(t, req)
		var e struct{ Field string }
		_ = json.Unmarshal([]byte(a.body), &e)
		if a.status != c.status || c.field != "" && e.Field != c.field {
			t.Errorf("%s %s %q = %d %s, want %d naming %q", c.method, c.path, c.body, a.status, a.body, c.status, c.field)
		}
	}
	if a := call(t, "GET", api+"/v1/skus/strict-1/events", secretAuditor, ""); strings.Contains(a.body, `"deducted"`) || strings.Contains(a.body, `"reserved"`) {
		t.Errorf("a refused request sold: %s", a.body)
	}

	// A control character in a header: a tab reaches the API, which names
	// the header; any other is refused by Go's HTTP server before a
	// handler runs, plain text and without X-Request-Id, as the spec says.
	for _, c := range []struct {
		value, contentType string
		requestID          bool
	}{{"k\tey", "application/json", true}, {"k\x01ey", "text/plain; charset=utf-8", false}} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(api, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT /v1/skus/strict-3 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\nContent-Length: 11\r\n\r\n{\"stock\":1}", op, c.value)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = conn.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != c.contentType || (resp.Header.Get("X-Request-Id") != "") != c.requestID {
			t.Errorf("Idempotency-Key %q = %d %v %s", c.value, resp.StatusCode, resp.Header, body)
		}
	}

	// The same keyed write, re-serialised: another key order and spacing.
	keyed := func(body string) answer {
		req, err := http.NewRequest("PUT", api+"/v1/skus/strict-2", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+op)
		req.Header.Set("Idempotency-Key", "create-strict-2")
		return send(t, req)
	}
	if a := keyed(`{"stock":3,"per_user_limit":1}`); a.status != 201 {
		t.Fatalf("keyed create: %d %s", a.status, a.body)
	}
	if a := keyed("{ \"per_user_limit\": 1,\n \"stock\": 3 }"); a.status != 201 || a.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("a re-serialised retry = %d %v %s, want the replayed 201", a.status, a.header, a.body)
	}
	if a := keyed(`{"stock":4,"per_user_limit":1}`); a.status != 422 {
		t.Errorf("another request with the key = %d %s, want 422", a.status, a.body)
	}

	// A key release 1.0.0 kept, fingerprinted over the raw body, still
	// replays a byte-identical retry after the upgrade.
	raw := "{ \"stock\": 5, \"per_user_limit\": 1 }"
	sum := sha256.Sum256([]byte("PUT /v1/skus/strict-4?\n" + raw))
	if _, err := st.Pool.Exec(context.Background(), `INSERT INTO idempotency_keys (principal, key, fingerprint, status, body)
		VALUES ('olga', 'kept-by-1.0.0', $1, 201, '{"kept":true}')`, hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("PUT", api+"/v1/skus/strict-4", strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+op)
	req.Header.Set("Idempotency-Key", "kept-by-1.0.0")
	if a := send(t, req); a.status != 201 || a.header.Get("Idempotent-Replayed") != "true" || !strings.Contains(string(a.body), "kept") {
		t.Errorf("a retry of a key 1.0.0 kept = %d %v %s, want its replayed 201", a.status, a.header, a.body)
	}
}
