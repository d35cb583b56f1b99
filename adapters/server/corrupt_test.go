package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestACorruptRecordAnswers503WithRetryAfterUntilItIsRebuilt corrupts a
// sold receipt and a hold record under a serving API: their retries get
// 503 with Retry-After asking for the same request_id, never 500, until
// the records are rebuilt from the ledger; then they get the original
// answers, and /metrics has counted each record once.
func TestACorruptRecordAnswers503WithRetryAfterUntilItIsRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "mended", 10, 1)
	st.RunProjector(t)
	api := startServe(t, st, Config{Tokens: testTokens})
	purchases := []struct {
		name, path, body string
		status           int
		corrupt          func(first map[string]any) error
		same             []string
	}{
		{"deduct", "/v1/skus/mended/deduct", `{"user_id":"u1","qty":1,"request_id":"r1"}`, 200,
			func(map[string]any) error {
				key, field := st.ReceiptAt(t, "mended", "r1")
				return st.RedisClient.HSet(ctx, key, field, "garbage").Err()
			}, []string{"seq", "event_id", "remaining"}},
		{"reserve", "/v1/skus/mended/holds", `{"user_id":"u2","qty":1,"request_id":"h1","ttl_seconds":600}`, 201,
			func(first map[string]any) error {
				return st.RedisClient.HSet(ctx, st.Keyspace.SKUKey("mended"), "hold:"+first["hold_id"].(string), "garbage").Err()
			}, []string{"hold_id", "seq", "remaining", "expires_at", "status"}},
	}
	for _, p := range purchases {
		first := call(t, "POST", api+p.path, secretGateway, p.body)
		if first.status != p.status {
			t.Fatalf("%s: %d %s", p.name, first.status, first.body)
		}
		var want map[string]any
		if err := json.Unmarshal([]byte(first.body), &want); err != nil {
			t.Fatal(err)
		}
		if err := p.corrupt(want); err != nil {
			t.Fatal(err)
		}
		r := call(t, "POST", api+p.path, secretGateway, p.body)
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"unavailable"`) ||
			!strings.Contains(r.body, "retry with the same request_id") {
			t.Fatalf("%s retry over a corrupt record: %d %v %s, want 503 unavailable with Retry-After", p.name, r.status, r.header, r.body)
		}
		for deadline := time.Now().Add(30 * time.Second); r.status == 503; r = call(t, "POST", api+p.path, secretGateway, p.body) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the record was not rebuilt within 30s: %s", p.name, r.body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var got map[string]any
		if r.status != p.status || json.Unmarshal([]byte(r.body), &got) != nil {
			t.Fatalf("%s retry after the repair: %d %s", p.name, r.status, r.body)
		}
		for _, field := range p.same {
			if got[field] != want[field] {
				t.Fatalf("%s retry after the repair answered %s = %v, the original %v", p.name, field, got[field], want[field])
			}
		}
	}
	metrics := call(t, "GET", api+"/metrics", "", "").body
	for _, want := range []string{"\ninvledger_corrupt_records_total{kind=\"receipt\"} 1\n", "\ninvledger_corrupt_records_total{kind=\"hold\"} 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}
