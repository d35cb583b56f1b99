package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestPurchaseDuringRedisStallAnswers503InTime: a Redis frozen with
// SIGSTOP must not hold a purchase past its deadline. The caller gets 503
// with Retry-After and "retry with the same request_id" within about the
// deadline, the stall is logged with the SKU and request id, and once
// Redis resumes the retry returns the purchase made once.
func TestPurchaseDuringRedisStallAnswers503InTime(t *testing.T) {
	t.Parallel()
	logs := &localstacktest.SyncBuffer{}
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) {
		c.RedisTimeout = time.Second
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	s.SKU(t, "phone-s", 10, 10)
	tokens, err := loadTokens(testGatewayToken, "")
	if err != nil {
		t.Fatal(err)
	}
	set, err := httpapi.NewTokenSet(tokens)
	if err != nil {
		t.Fatal(err)
	}
	h, err := apiHandler(s.App, Config{Components: []string{ComponentAPI}}, set)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	buy := func(requestID string) (*http.Response, map[string]any, time.Duration) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/skus/phone-s/deduct",
			strings.NewReader(`{"user_id":"u1","qty":1,"request_id":"`+requestID+`"}`))
		req.Header.Set("Authorization", "Bearer 0123456789abcdef0123")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("purchase %s: %v (the connection must not be dropped)", requestID, err)
		}
		defer resp.Body.Close()
		var body map[string]any
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("purchase %s: body %q: %v", requestID, b, err)
		}
		return resp, body, time.Since(start)
	}
	if resp, body, _ := buy("warm-up"); resp.StatusCode != http.StatusOK {
		t.Fatalf("warm-up purchase: %d %v", resp.StatusCode, body)
	}

	if err := s.Redis.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Redis.Resume() })
	resp, body, took := buy("stall-1")
	if resp.StatusCode != http.StatusServiceUnavailable || body["error"] != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("during the stall: %d %v %v, want 503 unavailable with Retry-After", resp.StatusCode, resp.Header, body)
	}
	if detail, _ := body["detail"].(string); !strings.Contains(detail, "retry with the same request_id") {
		t.Fatalf("detail %q does not tell the caller to retry with the same request_id", detail)
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("answered after %s with a 1s deadline", took)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "phone-s") || !strings.Contains(l, "stall-1") {
		t.Fatalf("the stall is not logged as a WARN with sku and request id:\n%s", l)
	}

	if err := s.Redis.Resume(); err != nil {
		t.Fatal(err)
	}
	var first map[string]any
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, body, _ := buy("stall-1")
		if resp.StatusCode == http.StatusOK {
			first = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry after the stall: %d %v", resp.StatusCode, body)
		}
	}
	_, again, _ := buy("stall-1")
	if first["event_id"] != again["event_id"] || first["seq"] != again["seq"] {
		t.Fatalf("retries disagree: %v vs %v", first, again)
	}
	if first["remaining"] != float64(8) {
		t.Fatalf("remaining = %v after two purchases of 10: the stalled purchase was made twice or not at all", first["remaining"])
	}
	deducted := 0
	for _, e := range s.StreamEvents(t, "phone-s") {
		if e["type"] == "deducted" {
			deducted++
		}
	}
	if deducted != 2 {
		t.Fatalf("stream holds %d deductions, want 2", deducted)
	}
}
