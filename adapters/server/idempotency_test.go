package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// callKey is call with an Idempotency-Key header.
func callKey(t *testing.T, method, url, secret, key, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Idempotency-Key", key)
	return send(t, req)
}

// send makes req and reads the whole answer.
func send(t testing.TB, req *http.Request) answer {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func wantAnswer(t *testing.T, what string, a answer, status int, replayed bool, field string) {
	t.Helper()
	if a.status != status || (a.header.Get("Idempotent-Replayed") == "true") != replayed {
		t.Fatalf("%s = %d (replayed %q) %s; want %d, replayed %v", what, a.status, a.header.Get("Idempotent-Replayed"), a.body, status, replayed)
	}
	if field != "" && !strings.Contains(a.body, `"field":"`+field+`"`) {
		t.Fatalf("%s = %s; want field %s", what, a.body, field)
	}
}

// TestIdempotencyKeyMakesEveryWriteSafeToRetry: a purchase takes the
// Idempotency-Key as its request_id; the writes without a natural key
// (SKU create, adjustment request, reconcile) answer a retry with the
// first answer, its status included, and do the work once, also when 20
// retries race; a key reused for another request is 422 (the IETF
// draft's answer), and a key given twice or two keys that disagree 400,
// each naming Idempotency-Key and changing nothing.
func TestIdempotencyKeyMakesEveryWriteSafeToRetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	const gw, op = "idem-gateway-secret-1", "idem-operator-secret1"
	base := startServe(t, st, Config{Tokens: "shop:gateway:" + gw + ",olga:operator:" + op})

	// SKU create: the retry gets the original 201, not the 200 of an
	// identical definition.
	first := callKey(t, "PUT", base+"/v1/skus/idem-1", op, "create-1", `{"stock":5}`)
	wantAnswer(t, "create", first, 201, false, "")
	again := callKey(t, "PUT", base+"/v1/skus/idem-1", op, "create-1", `{"stock":5}`)
	wantAnswer(t, "create retried", again, 201, true, "")
	if again.body != first.body {
		t.Fatalf("retried create answered %s, first %s", again.body, first.body)
	}
	wantAnswer(t, "key reused for another body", callKey(t, "PUT", base+"/v1/skus/idem-1", op, "create-1", `{"stock":6}`), 422, false, "Idempotency-Key")
	twice, err := http.NewRequest("PUT", base+"/v1/skus/idem-1", strings.NewReader(`{"stock":5}`))
	if err != nil {
		t.Fatal(err)
	}
	twice.Header.Set("Authorization", "Bearer "+op)
	twice.Header["Idempotency-Key"] = []string{"a", "b"}
	wantAnswer(t, "key given twice", send(t, twice), 400, false, "Idempotency-Key")
	wantAnswer(t, "warm", call(t, "POST", base+"/v1/skus/idem-1/warm", op, ""), 200, false, "")

	// A purchase: the header stands for request_id and must agree with one.
	buy := callKey(t, "POST", base+"/v1/skus/idem-1/deduct", gw, "buy-1", `{"user_id":"u1","qty":1}`)
	wantAnswer(t, "deduct by key", buy, 200, false, "")
	wantAnswer(t, "deduct retried by request_id", call(t, "POST", base+"/v1/skus/idem-1/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"buy-1"}`), 200, true, "")
	wantAnswer(t, "deduct with disagreeing keys", callKey(t, "POST", base+"/v1/skus/idem-1/deduct", gw, "buy-2", `{"user_id":"u2","qty":1,"request_id":"buy-3"}`), 400, false, "Idempotency-Key")
	wantAnswer(t, "deduct without either key", call(t, "POST", base+"/v1/skus/idem-1/deduct", gw, `{"user_id":"u2","qty":1}`), 400, false, "request_id")
	wantAnswer(t, "release with a key", callKey(t, "POST", base+"/v1/skus/idem-1/release", gw, "release-1", `{"user_id":"u1","request_id":"buy-1"}`), 200, false, "")

	// Adjustment requests: 20 racing retries with one key make one.
	var wg sync.WaitGroup
	answers := make([]answer, 20)
	for i := range answers {
		wg.Go(func() {
			answers[i] = callKey(t, "POST", base+"/v1/adjustments", op, "adjust-1", `{"sku":"idem-1","delta":3,"reason":"found"}`)
		})
	}
	wg.Wait()
	var created string
	for i, a := range answers {
		switch a.status {
		case 201:
			if created == "" {
				created = a.body
			} else if a.body != created {
				t.Fatalf("retry %d answered %s, another %s", i, a.body, created)
			}
		case 409: // the first was still running: retry later
		default:
			t.Fatalf("racing retry %d = %d %s", i, a.status, a.body)
		}
	}
	wantAnswer(t, "adjustment retried after the race", callKey(t, "POST", base+"/v1/adjustments", op, "adjust-1", `{"sku":"idem-1","delta":3,"reason":"found"}`), 201, true, "")
	var n int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM adjustments WHERE sku = 'idem-1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("adjustments after 21 requests with one key: %d (%v), want 1", n, err)
	}
	// A failed write is not kept: its retry runs again.
	wantAnswer(t, "adjustment of an unknown sku", callKey(t, "POST", base+"/v1/adjustments", op, "adjust-2", `{"sku":"nope","delta":3,"reason":"x"}`), 404, false, "")
	wantAnswer(t, "its retry", callKey(t, "POST", base+"/v1/adjustments", op, "adjust-2", `{"sku":"nope","delta":3,"reason":"x"}`), 404, false, "")

	// Reconcile: the retry answers the first run's report.
	rec := callKey(t, "POST", base+"/v1/reconcile", op, "reconcile-1", `{"sku":"idem-1"}`)
	wantAnswer(t, "reconcile", rec, 200, false, "")
	recAgain := callKey(t, "POST", base+"/v1/reconcile", op, "reconcile-1", `{"sku":"idem-1"}`)
	wantAnswer(t, "reconcile retried", recAgain, 200, true, "")
	var r1, r2 struct {
		RunID int64 `json:"run_id"`
	}
	if json.Unmarshal([]byte(rec.body), &r1) != nil || json.Unmarshal([]byte(recAgain.body), &r2) != nil || r1.RunID == 0 || r1 != r2 {
		t.Fatalf("reconcile retried answered run %d, first %d", r2.RunID, r1.RunID)
	}

	// Past the window the key is forgotten, and a retry runs again.
	if _, err := approot.Of(st.App).Adapters.Idempotency.DeleteBefore(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantAnswer(t, "create after the window", callKey(t, "PUT", base+"/v1/skus/idem-1", op, "create-1", `{"stock":5}`), 200, false, "")
}
