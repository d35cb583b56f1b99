package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// apiError is the error body of every refusal.
type apiError struct {
	Error  string `json:"error"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func decodeError(t testing.TB, r response) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error == "" {
		t.Fatalf("status %d body %q is not an error body: %v", r.status, r.body, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error Content-Type %q", ct)
	}
	return e
}

func expectError(t testing.TB, r response, status int, code string, detail ...string) apiError {
	t.Helper()
	e := decodeError(t, r)
	if r.status != status || e.Error != code {
		t.Fatalf("got %d %s, want %d %s (body %s)", r.status, e.Error, status, code, r.body)
	}
	// A wanted text is matched against "field: detail", as the CLI shows
	// the answer: the body names the field in its own member.
	shown := e.Detail
	if e.Field != "" {
		shown = e.Field + ": " + e.Detail
	}
	for _, d := range detail {
		if !strings.Contains(shown, d) {
			t.Fatalf("%q does not contain %q", shown, d)
		}
	}
	return e
}

// redisFootprint is everything a deduction would change in Redis.
// redisFootprint is what a purchase would change of a SKU in Redis:
// fields counts every field of its hash, where a one-hash SKU keeps its
// receipts and buyers (docs/storage.md), and buyers and requests the
// hashes of the 1.0 layout.
type redisFootprint struct {
	stock, seq, limit string
	streamLen         int64
	fields            int64
	buyers, requests  int64
}

func (s *stack) footprint(t testing.TB, sku string) redisFootprint {
	t.Helper()
	ctx := context.Background()
	v, err := s.rdb.HMGet(ctx, s.keys.SKUKey(sku), "stock", "seq", "limit").Result()
	if err != nil {
		t.Fatal(err)
	}
	var f redisFootprint
	f.stock, _ = v[0].(string)
	f.seq, _ = v[1].(string)
	f.limit, _ = v[2].(string)
	if f.streamLen, err = s.rdb.XLen(ctx, s.keys.SKUStreamKey(sku)).Result(); err != nil {
		t.Fatal(err)
	}
	if f.fields, err = s.rdb.HLen(ctx, s.keys.SKUKey(sku)).Result(); err != nil {
		t.Fatal(err)
	}
	if f.buyers, err = s.rdb.HLen(ctx, s.keys.BuyersKey(sku)).Result(); err != nil {
		t.Fatal(err)
	}
	if f.requests, err = s.rdb.HLen(ctx, s.keys.RequestsKey(sku)).Result(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBadInputChangesNothing checks over HTTP that bad input changes nothing: every malformed
// deduct is 400 invalid_request naming the field, and Redis is untouched.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "bad-input"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":2}`)
	// One real purchase first, so the "after" state is not the trivial one.
	if r := s.do(t, http.MethodPost, "/v1/skus/"+sku+"/deduct", secretGateway, `{"user_id":"u0","qty":1,"request_id":"r0"}`); r.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
	before := s.footprint(t, sku)
	if before.stock != "9" || before.seq != "2" || before.streamLen < 2 {
		t.Fatalf("unexpected start state %+v", before)
	}

	long129 := strings.Repeat("r", 129)
	huge := `{"user_id":"u1","qty":1,"request_id":"r1","pad":"` + strings.Repeat("x", 70<<10) + `"}`
	deductPath := "/v1/skus/" + sku + "/deduct"
	type bad struct {
		name  string
		path  string
		body  io.Reader // nil: no body
		field string    // the detail must contain this
	}
	str := func(s string) io.Reader { return strings.NewReader(s) }
	// chunked hides the length, so the limit is enforced while reading.
	chunked := func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) }
	cases := []bad{
		{"qty 0", deductPath, str(`{"user_id":"u1","qty":0,"request_id":"r1"}`), "qty"},
		{"qty -1", deductPath, str(`{"user_id":"u1","qty":-1,"request_id":"r1"}`), "qty"},
		{"qty 1.5", deductPath, str(`{"user_id":"u1","qty":1.5,"request_id":"r1"}`), "qty"},
		{"qty string", deductPath, str(`{"user_id":"u1","qty":"1","request_id":"r1"}`), "qty"},
		{"qty missing", deductPath, str(`{"user_id":"u1","request_id":"r1"}`), "qty"},
		{"qty null", deductPath, str(`{"user_id":"u1","qty":null,"request_id":"r1"}`), "qty"},
		{"qty overflow", deductPath, str(`{"user_id":"u1","qty":1e30,"request_id":"r1"}`), "qty"},
		{"qty above per_user_limit", deductPath, str(`{"user_id":"u1","qty":3,"request_id":"r1"}`), "qty"},
		{"user_id empty", deductPath, str(`{"user_id":"","qty":1,"request_id":"r1"}`), "user_id"},
		{"user_id missing", deductPath, str(`{"qty":1,"request_id":"r1"}`), "user_id"},
		{"user_id not a string", deductPath, str(`{"user_id":1,"qty":1,"request_id":"r1"}`), "user_id"},
		{"request_id 129 chars", deductPath, str(`{"user_id":"u1","qty":1,"request_id":"` + long129 + `"}`), "request_id"},
		{"request_id missing", deductPath, str(`{"user_id":"u1","qty":1}`), "request_id"},
		{"sku with braces", "/v1/skus/bad%7Bsku%7D/deduct", str(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku"},
		{"sku with space", "/v1/skus/a%20b/deduct", str(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku"},
		{"sku with slash", "/v1/skus/a%2Fb/deduct", str(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku"},
		{"sku too long", "/v1/skus/" + strings.Repeat("s", 65) + "/deduct", str(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku"},
		{"unknown field", deductPath, str(`{"user_id":"u1","qty":1,"request_id":"r1","coupon":"x"}`), `unknown field "coupon"`},
		{"body over 64 KiB", deductPath, str(huge), "body"},
		{"body over 64 KiB chunked", deductPath, chunked(huge), "body"},
		{"body over 64 KiB of trailing space", deductPath, chunked(`{"user_id":"u1","qty":1,"request_id":"r1"}` + strings.Repeat(" ", 70<<10)), "body"},
		{"malformed JSON", deductPath, str(`{"user_id":"u1","qty":1,`), "body"},
		{"malformed JSON syntax", deductPath, str(`{user_id:"u1"}`), "body"},
		{"empty body", deductPath, nil, "body"},
		{"trailing garbage", deductPath, str(`{"user_id":"u1","qty":1,"request_id":"r1"} garbage`), "body"},
		{"not an object", deductPath, str(`[{"user_id":"u1","qty":1,"request_id":"r1"}]`), "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := s.doReader(t, http.MethodPost, c.path, secretGateway, c.body)
			e := expectError(t, r, http.StatusBadRequest, "invalid_request", c.field)
			t.Logf("%d %s: %s", r.status, e.Error, e.Detail)
		})
	}
	// Bad releases write nothing either.
	relPath := "/v1/skus/" + sku + "/release"
	for name, body := range map[string]string{
		"release without request_id": `{"user_id":"u0"}`,
		"release with unknown field": `{"user_id":"u0","request_id":"r0","qty":1}`,
		"release with long reason":   `{"user_id":"u0","request_id":"r0","reason":"` + strings.Repeat("x", 300) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			expectError(t, s.do(t, http.MethodPost, relPath, secretGateway, body), http.StatusBadRequest, "invalid_request")
		})
	}
	if after := s.footprint(t, sku); after != before {
		t.Fatalf("bad input changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
	for _, other := range []string{"bad{sku}", "a b", "a/b"} {
		if n, err := s.rdb.Exists(context.Background(), s.keys.SKUKey(other)).Result(); err != nil || n != 0 {
			t.Fatalf("key of sku %q exists: %d %v", other, n, err)
		}
	}
	// The connection closed after an oversized body must not break later calls.
	if r := s.do(t, http.MethodPost, deductPath, secretGateway, `{"user_id":"u9","qty":1,"request_id":"r9"}`); r.status != http.StatusOK {
		t.Fatalf("good deduct after the bad ones: %d %s", r.status, r.body)
	}
}

// TestAuthMatrix checks every endpoint against no token, a bad token and
// each role.
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.mustCreateWarm(t, "auth", `{"stock":100,"per_user_limit":1}`)

	type endpoint struct {
		method, path string
		body         func(i int) string // i makes each call unique
		allowed      []Role
		okStatus     int // status for an allowed role
	}
	endpoints := []endpoint{
		{http.MethodPut, "/v1/skus/auth", func(int) string { return `{"stock":100,"per_user_limit":1}` }, []Role{RoleOperator}, http.StatusOK},
		{http.MethodPost, "/v1/skus/auth/warm", func(int) string { return "" }, []Role{RoleOperator}, http.StatusOK},
		{http.MethodGet, "/v1/skus/auth", func(int) string { return "" }, []Role{RoleOperator, RoleApprover, RoleAuditor}, http.StatusOK},
		{http.MethodPost, "/v1/skus/auth/deduct", func(i int) string {
			return fmt.Sprintf(`{"user_id":"u%d","qty":1,"request_id":"r%d"}`, i, i)
		}, []Role{RoleGateway}, http.StatusOK},
		// An unknown deduction: past auth, the answer is the ledger's 404.
		{http.MethodPost, "/v1/skus/auth/release", func(i int) string {
			return fmt.Sprintf(`{"user_id":"u%d","request_id":"nope%d"}`, i, i)
		}, []Role{RoleGateway}, http.StatusNotFound},
	}
	type caller struct {
		name   string
		header string // the Authorization header; "" sends none
		role   Role   // "" for callers with no valid token
	}
	callers := []caller{
		{"no token", "", ""},
		{"bad token", "Bearer " + secretBad, ""},
		{"basic scheme", "Basic " + secretGateway, ""},
		{"empty bearer", "Bearer ", ""},
		{"gateway", "Bearer " + secretGateway, RoleGateway},
		{"operator", "Bearer " + secretOperator, RoleOperator},
		{"approver", "Bearer " + secretApprover, RoleApprover},
		{"auditor", "Bearer " + secretAuditor, RoleAuditor},
	}
	i := 0
	for _, ep := range endpoints {
		for _, c := range callers {
			i++
			t.Run(ep.method+" "+ep.path+" as "+c.name, func(t *testing.T) {
				var body io.Reader
				if b := ep.body(i); b != "" {
					body = strings.NewReader(b)
				}
				req, err := http.NewRequest(ep.method, s.srv.URL+ep.path, body)
				if err != nil {
					t.Fatal(err)
				}
				if c.header != "" {
					req.Header.Set("Authorization", c.header)
				}
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := response{status: resp.StatusCode, header: resp.Header, body: b}
				switch {
				case c.role == "":
					expectError(t, r, http.StatusUnauthorized, codeUnauthorized)
					if resp.Header.Get("WWW-Authenticate") == "" {
						t.Error("401 without WWW-Authenticate")
					}
				case !contains(ep.allowed, c.role):
					expectError(t, r, http.StatusForbidden, codeForbidden, string(c.role))
				default:
					if r.status != ep.okStatus {
						t.Fatalf("got %d %s, want %d", r.status, r.body, ep.okStatus)
					}
				}
			})
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		r := s.do(t, http.MethodGet, path, "", "")
		if r.status != http.StatusOK || !json.Valid(r.body) {
			t.Errorf("GET %s without a token: %d %s", path, r.status, r.body)
		}
	}
}

func contains(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

type skuView struct {
	SKU          string `json:"sku"`
	RedisStock   *int64 `json:"redis_stock"`
	LedgerStock  *int64 `json:"ledger_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	LedgerSeq    *int64 `json:"ledger_seq"`
	State        string `json:"state"`
	InitialStock int64  `json:"initial_stock"`
	PerUserLimit int64  `json:"per_user_limit"`
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "flash-1"
	skuPath := "/v1/skus/" + sku
	op, gw := secretOperator, secretGateway

	// Create: 201, identical 200, different 409.
	r := s.do(t, http.MethodPut, skuPath, op, `{"stock":3,"per_user_limit":1}`)
	if r.status != http.StatusCreated || string(r.body) != `{"sku":"flash-1","stock":3,"per_user_limit":1}` {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r = s.do(t, http.MethodPut, skuPath, op, `{"stock":3}`); r.status != http.StatusOK {
		t.Fatalf("create identical (default limit): %d %s", r.status, r.body)
	}
	expectError(t, s.do(t, http.MethodPut, skuPath, op, `{"stock":4,"per_user_limit":1}`), http.StatusConflict, "conflict")
	expectError(t, s.do(t, http.MethodPut, skuPath, op, `{"stock":3,"per_user_limit":2}`), http.StatusConflict, "conflict")

	// Not warmed yet.
	expectError(t, s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"early"}`), http.StatusConflict, "not_warmed")
	var v skuView
	r = s.do(t, http.MethodGet, skuPath, secretAuditor, "")
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != http.StatusOK {
		t.Fatalf("get before warm: %d %s %v", r.status, r.body, err)
	}
	if v.RedisStock != nil || v.RedisSeq != nil || v.LedgerStock != nil || v.LedgerSeq != nil || v.State != "not_warmed" || v.InitialStock != 3 || v.PerUserLimit != 1 {
		t.Fatalf("get before warm: %s", r.body)
	}
	if !bytes.Contains(r.body, []byte(`"redis_stock":null`)) {
		t.Fatalf("unknown figures must be null: %s", r.body)
	}

	// Warm.
	var w wire.WarmJSON
	r = s.do(t, http.MethodPost, skuPath+"/warm", op, "")
	if err := json.Unmarshal(r.body, &w); err != nil || r.status != http.StatusOK {
		t.Fatalf("warm: %d %s %v", r.status, r.body, err)
	}
	if w != (wire.WarmJSON{SKU: sku, Stock: 3, Seq: 1, Status: "open", Stocked: true}) {
		t.Fatalf("warm: %s", r.body)
	}

	// Deduct, then a retry gives the byte-identical body.
	type receipt struct {
		Status    string `json:"status"`
		Seq       int64  `json:"seq"`
		Remaining int64  `json:"remaining"`
		EventID   string `json:"event_id"`
	}
	first := s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"req-1"}`)
	var rc receipt
	if err := json.Unmarshal(first.body, &rc); err != nil || first.status != http.StatusOK {
		t.Fatalf("deduct: %d %s %v", first.status, first.body, err)
	}
	if rc.Status != "ok" || rc.Seq != 2 || rc.Remaining != 2 || uuid.Validate(rc.EventID) != nil {
		t.Fatalf("deduct: %s", first.body)
	}
	if ct := first.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("deduct Content-Type %q", ct)
	}
	retry := s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"request_id":"req-1","qty":1,"user_id":"u1"}`)
	if retry.status != http.StatusOK || !bytes.Equal(retry.body, first.body) {
		t.Fatalf("retry: %d %s, first %s", retry.status, retry.body, first.body)
	}

	// Warm mid-sale changes nothing.
	r = s.do(t, http.MethodPost, skuPath+"/warm", op, "")
	if err := json.Unmarshal(r.body, &w); err != nil || r.status != http.StatusOK {
		t.Fatalf("re-warm: %d %s %v", r.status, r.body, err)
	}
	if w != (wire.WarmJSON{SKU: sku, Stock: 2, Seq: 2, Status: "open", Stocked: false}) {
		t.Fatalf("re-warm reset the sale: %s", r.body)
	}

	// Refusals.
	expectError(t, s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"req-1b"}`), http.StatusConflict, "already_purchased")
	expectError(t, s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u2","qty":1,"request_id":"req-1"}`), http.StatusConflict, "conflict", "req-1")
	for i := 2; i <= 3; i++ {
		body := fmt.Sprintf(`{"user_id":"u%d","qty":1,"request_id":"req-%d"}`, i, i)
		if r := s.do(t, http.MethodPost, skuPath+"/deduct", gw, body); r.status != http.StatusOK {
			t.Fatalf("deduct %d: %d %s", i, r.status, r.body)
		}
	}
	expectError(t, s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u4","qty":1,"request_id":"req-4"}`), http.StatusConflict, "sold_out")

	// Release twice: the stock comes back once.
	type release struct {
		Status          string `json:"status"`
		EventID         string `json:"event_id"`
		Seq             int64  `json:"seq"`
		AlreadyReleased bool   `json:"already_released"`
	}
	var rel1, rel2 release
	r = s.do(t, http.MethodPost, skuPath+"/release", gw, `{"user_id":"u1","request_id":"req-1","reason":"payment timeout"}`)
	if err := json.Unmarshal(r.body, &rel1); err != nil || r.status != http.StatusOK || rel1.Status != "released" || rel1.AlreadyReleased || rel1.Seq != 5 {
		t.Fatalf("release: %d %s %v", r.status, r.body, err)
	}
	r = s.do(t, http.MethodPost, skuPath+"/release", gw, `{"user_id":"u1","request_id":"req-1"}`)
	if err := json.Unmarshal(r.body, &rel2); err != nil || r.status != http.StatusOK || !rel2.AlreadyReleased || rel2.EventID != rel1.EventID || rel2.Seq != rel1.Seq {
		t.Fatalf("release again: %d %s %v", r.status, r.body, err)
	}
	expectError(t, s.do(t, http.MethodPost, skuPath+"/release", gw, `{"user_id":"u1","request_id":"never"}`), http.StatusNotFound, "not_found")
	expectError(t, s.do(t, http.MethodPost, skuPath+"/release", gw, `{"user_id":"u9","request_id":"req-2"}`), http.StatusConflict, "conflict")

	r = s.do(t, http.MethodGet, skuPath, secretOperator, "")
	v = skuView{}
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != http.StatusOK {
		t.Fatalf("get: %d %s %v", r.status, r.body, err)
	}
	if v.SKU != sku || v.RedisStock == nil || *v.RedisStock != 1 || v.RedisSeq == nil || *v.RedisSeq != 5 || v.State != "open" {
		t.Fatalf("get after the sale: %s", r.body)
	}
	// The released unit can be bought again, once.
	if r := s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u4","qty":1,"request_id":"req-4"}`); r.status != http.StatusOK {
		t.Fatalf("deduct after release: %d %s", r.status, r.body)
	}
	expectError(t, s.do(t, http.MethodPost, skuPath+"/deduct", gw, `{"user_id":"u5","qty":1,"request_id":"req-5"}`), http.StatusConflict, "sold_out")

	// Unknown SKUs.
	expectError(t, s.do(t, http.MethodGet, "/v1/skus/nope", secretAuditor, ""), http.StatusNotFound, "not_found")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/nope/warm", op, ""), http.StatusNotFound, "not_found")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/nope/release", gw, `{"user_id":"u1","request_id":"r1"}`), http.StatusNotFound, "not_found")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/nope/deduct", gw, `{"user_id":"u1","qty":1,"request_id":"r1"}`), http.StatusNotFound, "not_found", "never created")
	expectError(t, s.do(t, http.MethodGet, "/v1/skus/bad%7B", secretAuditor, ""), http.StatusBadRequest, "invalid_request", "sku")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/a%20b/warm", op, ""), http.StatusBadRequest, "invalid_request", "sku")
	expectError(t, s.do(t, http.MethodPut, "/v1/skus/a%20b", op, `{"stock":1}`), http.StatusBadRequest, "invalid_request", "sku")
	expectError(t, s.do(t, http.MethodPut, "/v1/skus/new", op, `{"stock":1,"per_user_limit":0}`), http.StatusBadRequest, "invalid_request", "per_user_limit")
	expectError(t, s.do(t, http.MethodPut, "/v1/skus/new", op, `{"per_user_limit":1}`), http.StatusBadRequest, "invalid_request", "stock")
}

// TestWarmAfterRedisLoss: the ledger has the SKU's events but Redis lost
// them, so warm must refuse and point at restore-redis.
func TestWarmAfterRedisLoss(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "lost-1"
	s.mustCreateWarm(t, sku, `{"stock":5}`)
	ctx := context.Background()
	// What the projector would have written for the stocked event.
	_, err := s.pool.Exec(ctx, `INSERT INTO ledger_entries
		(event_id, sku, seq, type, delta, qty, balance_after, occurred_at, stream_id)
		VALUES ($1, $2, 1, 'stocked', 5, 5, 5, now(), '1-0')`, uuid.NewString(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.Del(ctx, s.keys.SKUKey(sku), s.keys.BuyersKey(sku), s.keys.RequestsKey(sku)).Err(); err != nil {
		t.Fatal(err)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/"+sku+"/warm", secretOperator, ""),
		http.StatusConflict, "needs_restore", "invledger restore-redis --sku "+sku)
	if n, _ := s.rdb.Exists(ctx, s.keys.SKUKey(sku)).Result(); n != 0 {
		t.Fatal("a refused warm stocked the sku again")
	}
}

func newStubHandler(t *testing.T, cfg Config) http.Handler {
	t.Helper()
	h, err := NewHandler(stubbed(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, method, path, secret, body string) response {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func TestRoutingAndReadiness(t *testing.T) {
	ready := Readiness{Ready: true, Checks: []DependencyCheck{{"redis", true}, {"postgres", false}}}
	h := newStubHandler(t, Config{Ready: func(context.Context) Readiness { return ready }})

	r := serve(h, http.MethodGet, "/nowhere", "", "")
	expectError(t, r, http.StatusNotFound, "not_found")
	r = serve(h, http.MethodDelete, "/v1/skus/x", secretOperator, "")
	expectError(t, r, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if allow := r.header.Get("Allow"); !strings.Contains(allow, "PUT") || !strings.Contains(allow, "GET") {
		t.Fatalf("Allow %q", allow)
	}
	r = serve(h, http.MethodGet, "/v1/skus/x/deduct", secretGateway, "")
	expectError(t, r, http.StatusMethodNotAllowed, codeMethodNotAllowed)
	if r := serve(h, http.MethodGet, "/healthz", "", ""); r.status != http.StatusOK || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", r.status, r.body)
	}
	if r := serve(h, http.MethodGet, "/readyz", "", ""); r.status != http.StatusOK ||
		string(r.body) != `{"status":"ready","redis":"ok","postgres":"unreachable"}` {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	ready = Readiness{Checks: []DependencyCheck{{"redis", false}, {"postgres", true}}}
	if r := serve(h, http.MethodGet, "/readyz", "", ""); r.status != http.StatusServiceUnavailable ||
		string(r.body) != `{"status":"not_ready","error":"not_ready","redis":"unreachable","postgres":"ok"}` {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}

	// A handler that panics answers 500 internal instead of dropping the connection.
	expectError(t, serve(h, http.MethodGet, "/v1/skus/x", secretAuditor, ""), http.StatusInternalServerError, "internal")
}

func TestMetricsIsPublicAndAdjustmentsSeeThePrincipal(t *testing.T) {
	var who Principal
	h := newStubHandler(t, Config{
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "metrics")
		}),
		Adjustments: approveFunc(func(ctx context.Context) {
			who, _ = PrincipalFrom(ctx)
		}),
	})
	if r := serve(h, http.MethodGet, "/metrics", "", ""); r.status != http.StatusOK || string(r.body) != "metrics" {
		t.Fatalf("metrics: %d %s", r.status, r.body)
	}
	expectError(t, serve(h, http.MethodPost, "/v1/adjustments/7/approve", "", ""), http.StatusUnauthorized, codeUnauthorized)
	expectError(t, serve(h, http.MethodPost, "/v1/adjustments/7/approve", secretOperator, ""), http.StatusForbidden, codeForbidden)
	if r := serve(h, http.MethodPost, "/v1/adjustments/7/approve", secretApprover, ""); r.status != http.StatusOK || who != (Principal{"adam", RoleApprover}) {
		t.Fatalf("approve: %d, principal %+v", r.status, who)
	}
}

// approveFunc is an approval flow whose Approve calls f and succeeds.
type approveFunc func(ctx context.Context)

func (approveFunc) Request(context.Context, string, int64, string, string) (domain.Adjustment, error) {
	panic("not used")
}

func (f approveFunc) Approve(ctx context.Context, id int64, _ string) (domain.Adjustment, error) {
	f(ctx)
	return domain.Adjustment{ID: id, Status: domain.AdjustmentApplied}, nil
}

func (approveFunc) Reject(context.Context, int64, string) (domain.Adjustment, error) {
	panic("not used")
}

func (approveFunc) List(context.Context, ledger.AdjustmentQuery) (ledger.AdjustmentPage, error) {
	panic("not used")
}

func TestConfigValidate(t *testing.T) {
	_, err := NewHandler(Config{
		Tokens:       []Token{{"x", "root", "short"}},
		MaxBodyBytes: -1,
	})
	if err == nil {
		t.Fatal("NewHandler accepted a bad config")
	}
	for _, want := range []string{"Config.Ledger is required", "Config.Tokens", "Config.Ready", "MaxBodyBytes",
		"Config.Closer", "Config.Auditor", "Config.Reconciler", "Config.Runs", "Config.Adjustments", "Config.Metrics", "Config.Idempotency", "Config.Webhooks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestMaxBodyBytesReachesEveryRoute sends a body over a small limit to
// every route that reads one; each refuses it before calling a service.
func TestMaxBodyBytesReachesEveryRoute(t *testing.T) {
	h := newStubHandler(t, Config{MaxBodyBytes: 16})
	body := `{"sku":"a","reason":"` + strings.Repeat("x", 32) + `"}`
	for _, c := range []struct{ method, path, secret string }{
		{http.MethodPut, "/v1/skus/a", secretOperator},
		{http.MethodPost, "/v1/skus/a/deduct", secretGateway},
		{http.MethodPost, "/v1/skus/a/release", secretGateway},
		{http.MethodPost, "/v1/reconcile", secretOperator},
		{http.MethodPost, "/v1/adjustments", secretOperator},
	} {
		expectError(t, serve(h, c.method, c.path, c.secret, body), http.StatusBadRequest, "invalid_request", "body")
	}
}
