package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/wire"
)

// TestRequestIDsReachTheAnswerTheLogAndTheMetrics: a valid X-Request-Id
// of the caller is kept, a bad one replaced; the answer carries it, an
// error body repeats it as trace_id, and the request's one access line
// has it with the route pattern, status and principal, and never the
// token; OnRequest sees the same route and status.
func TestRequestIDsReachTheAnswerTheLogAndTheMetrics(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	type seen struct {
		route  string
		status int
	}
	var requests []seen
	cfg := stubbed(t, Config{})
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	cfg.OnRequest = func(route string, status int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		requests = append(requests, seen{route, status})
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}

	req := httptest.NewRequest(http.MethodPost, "/v1/skus/a/deduct", strings.NewReader(`{"user_id":"u1","qty":0,"request_id":"r1"}`))
	req.Header.Set("Authorization", "Bearer "+secretGateway)
	req.Header.Set(wire.HeaderRequestID, "edge-42")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusBadRequest || rec.Header().Get(wire.HeaderRequestID) != "edge-42" || body["trace_id"] != "edge-42" {
		t.Fatalf("answer %d %v %s; want 400 with X-Request-Id and trace_id edge-42", rec.Code, rec.Header(), rec.Body)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("access log %q: %v", logs.String(), err)
	}
	for k, want := range map[string]any{"msg": "http request", "method": "POST", "route": "POST /v1/skus/{sku}/deduct",
		"status": float64(400), "principal": "storefront", "http_request_id": "edge-42"} {
		if line[k] != want {
			t.Errorf("access log %s = %v, want %v (line %s)", k, line[k], want, logs.String())
		}
	}
	if strings.Contains(logs.String(), secretGateway) {
		t.Fatalf("the access log holds the token: %s", logs.String())
	}

	bad := httptest.NewRequest(http.MethodGet, "/nowhere", nil)
	bad.Header.Set(wire.HeaderRequestID, " spaced ")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, bad)
	if id := rec.Header().Get(wire.HeaderRequestID); id == "" || id == " spaced " || !strings.Contains(rec.Body.String(), `"trace_id":"`+id+`"`) {
		t.Fatalf("a bad X-Request-Id was kept or not replaced: %q, body %s", id, rec.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requests) != 2 || requests[0] != (seen{"POST /v1/skus/{sku}/deduct", 400}) || requests[1] != (seen{"/", 404}) {
		t.Fatalf("OnRequest saw %v", requests)
	}
}
