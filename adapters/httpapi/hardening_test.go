package httpapi

import (
	"net/http"
	"testing"
)

// TestDuplicateAndCaseKeysAreRefusedAndWriteNothing: {"qty":1,"qty":5} no
// longer buys 5, and {"QTY":3} is not read as qty.
func TestDuplicateAndCaseKeysAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "dup-keys"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":5}`)
	before := s.footprint(t, sku)
	deduct := "/v1/skus/" + sku + "/deduct"
	for _, c := range []struct{ method, path, secret, body, detail string }{
		{http.MethodPost, deduct, secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1","qty":5}`, `qty: is given more than once`},
		{http.MethodPost, deduct, secretGateway, `{"user_id":"u1","QTY":3,"request_id":"r1"}`, `unknown field "QTY"`},
		{http.MethodPost, "/v1/skus/" + sku + "/release", secretGateway, `{"user_id":"u1","request_id":"r1","request_id":"r2"}`, "request_id: is given more than once"},
		{http.MethodPut, "/v1/skus/dup-keys-2", secretOperator, `{"stock":1,"stock":100}`, "stock: is given more than once"},
		{http.MethodPut, "/v1/skus/dup-keys-2", secretOperator, `{"Stock":100}`, `unknown field "Stock"`},
		{http.MethodPost, "/v1/adjustments", secretOperator, `{"sku":"dup-keys","delta":1,"delta":100,"reason":"x"}`, "delta: is given more than once"},
		{http.MethodPost, "/v1/reconcile", secretOperator, `{"SKU":"dup-keys"}`, `unknown field "SKU"`},
	} {
		expectError(t, s.do(t, c.method, c.path, c.secret, c.body), http.StatusBadRequest, "invalid_request", c.detail)
	}
	if after := s.footprint(t, sku); after != before {
		t.Fatalf("refused bodies changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
	if r := s.do(t, http.MethodGet, "/v1/skus/dup-keys-2", secretAuditor, ""); r.status != http.StatusNotFound {
		t.Fatalf("refused create defined the SKU: %d %s", r.status, r.body)
	}
}

// TestNonCanonicalUserIDsAreRefused: "u9 " and a decomposed accent are
// refused with a detail saying why, not bought as other buyers.
func TestNonCanonicalUserIDsAreRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "canonical-users"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":1}`)
	deduct := "/v1/skus/" + sku + "/deduct"
	if r := s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"u9","qty":1,"request_id":"r1"}`); r.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
	before := s.footprint(t, sku)
	expectError(t, s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"u9 ","qty":1,"request_id":"r2"}`),
		http.StatusBadRequest, "invalid_request", "user_id:", "whitespace")
	expectError(t, s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"jose\u0301","qty":1,"request_id":"r3"}`),
		http.StatusBadRequest, "invalid_request", "user_id:", "NFC")
	if after := s.footprint(t, sku); after != before {
		t.Fatalf("refused user ids changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestReplayHeaders: a retried purchase keeps its byte-identical body and
// says in headers that it is a replay, and whether the units went back.
func TestReplayHeaders(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "replay-headers"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":1}`)
	deduct := "/v1/skus/" + sku + "/deduct"
	const body = `{"user_id":"u1","qty":1,"request_id":"case-1"}`
	first := s.do(t, http.MethodPost, deduct, secretGateway, body)
	if first.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", first.status, first.body)
	}
	check := func(r response, replayed, released string) {
		t.Helper()
		if r.status != http.StatusOK || string(r.body) != string(first.body) {
			t.Fatalf("replay: %d %s, want 200 %s", r.status, r.body, first.body)
		}
		if got := r.header.Get("Idempotent-Replayed"); got != replayed {
			t.Fatalf("Idempotent-Replayed = %q, want %q", got, replayed)
		}
		if got := r.header.Get("Invledger-Released"); got != released {
			t.Fatalf("Invledger-Released = %q, want %q", got, released)
		}
	}
	check(first, "", "")
	check(s.do(t, http.MethodPost, deduct, secretGateway, body), "true", "")
	if r := s.do(t, http.MethodPost, "/v1/skus/"+sku+"/release", secretGateway, `{"user_id":"u1","request_id":"case-1"}`); r.status != http.StatusOK {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	check(s.do(t, http.MethodPost, deduct, secretGateway, body), "true", "true")
}
