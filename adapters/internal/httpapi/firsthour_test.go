package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestUnknownSKUIsNotFoundAndColdIsNotWarmed: a deduct on a SKU that was
// never created answers 404 not_found, one on a SKU that is defined but not
// warmed 409 not_warmed (issue 17, F6); release of either is 404.
func TestUnknownSKUIsNotFoundAndColdIsNotWarmed(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const body, release = `{"user_id":"u1","qty":1,"request_id":"r1"}`, `{"user_id":"u1","request_id":"r1"}`
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/never-created/deduct", secretGateway, body), http.StatusNotFound, "not_found", "never created")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/never-created/release", secretGateway, release), http.StatusNotFound, "not_found")
	if r := s.do(t, http.MethodPut, "/v1/skus/cold", secretOperator, `{"stock":3}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/cold/deduct", secretGateway, body), http.StatusConflict, "not_warmed")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/cold/release", secretGateway, release), http.StatusNotFound, "not_found")
}

// TestFieldErrorsNameTheFieldOnce: the field at fault is the body's
// "field" member and the detail does not repeat it (F10); an absent
// request_id says it is required and why (F7); the body's only other
// member is the trace_id.
func TestFieldErrorsNameTheFieldOnce(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.mustCreateWarm(t, "once", `{"stock":10,"per_user_limit":2}`)
	for _, c := range []struct{ body, field, detail string }{
		{`{"user_id":"u1","qty":3,"request_id":"r1"}`, "qty", "exceeds the sku's per-user limit"},
		{`{"user_id":"u1","qty":1}`, "request_id", "is required: it is the idempotency key that makes a retry safe, never buying twice"},
		{`{"user_id":"u1","qty":1,"request_id":""}`, "request_id", "is required: it is the idempotency key that makes a retry safe, never buying twice"},
		{`{"user_id":"","qty":1,"request_id":"r1"}`, "user_id", "must be 1-128 printable characters"},
	} {
		r := s.do(t, http.MethodPost, "/v1/skus/once/deduct", secretGateway, c.body)
		var e map[string]string
		if err := json.Unmarshal(r.body, &e); err != nil || r.status != http.StatusBadRequest || len(e) != 4 || e["trace_id"] == "" ||
			e["error"] != "invalid_request" || e["field"] != c.field || e["detail"] != c.detail {
			t.Errorf("%s: %d %s, want 400 with field %q and detail %q", c.body, r.status, r.body, c.field, c.detail)
		}
	}
}
