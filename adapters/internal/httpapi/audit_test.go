package httpapi

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
)

func newAuditStack(t *testing.T) (*stack, *stacktest.Stack) {
	t.Helper()
	ls := stacktest.New(t)
	return serveStack(t, ls), ls
}

// decodeJSONBody decodes a 200 answer into v and also returns its keys, so
// a test can check the body's exact shape.
func decodeJSONBody(t *testing.T, r response, v any) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return slices.Sorted(maps.Keys(raw))
}

func TestAuditEndpoints(t *testing.T) {
	t.Parallel()
	s, ls := newAuditStack(t)
	const odd = "ann smith/1" // a user id with a space and a slash still routes
	s.mustCreateWarm(t, "au-1", `{"stock":10,"per_user_limit":2}`)
	var before time.Time
	for i, step := range []struct{ path, body string }{
		{"deduct", fmt.Sprintf(`{"user_id":%q,"qty":2,"request_id":"r1"}`, odd)},
		{"deduct", `{"user_id":"bob","qty":1,"request_id":"r2"}`},
		{"release", `{"user_id":"bob","request_id":"r2","reason":"payment timeout"}`},
		{"deduct", `{"user_id":"cy","qty":1,"request_id":"r3"}`},
	} {
		if i == 1 {
			before = time.Now() // after the first purchase, before bob's
		}
		time.Sleep(2 * time.Millisecond)
		if r := s.do(t, http.MethodPost, "/v1/skus/au-1/"+step.path, secretGateway, step.body); r.status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", step.path, step.body, r.status, r.body)
		}
	}
	ls.ProjectStreams(t)
	oddPath := "/v1/users/" + url.PathEscape(odd) + "/purchases"

	// Roles: auditor, operator and approver read; gateway may not.
	for _, path := range []string{"/v1/skus/au-1/events", "/v1/skus/au-1/balance?at=" + url.QueryEscape(time.Now().Format(time.RFC3339Nano)),
		"/v1/skus/au-1/buyers", oddPath} {
		for _, secret := range []string{secretAuditor, secretOperator, secretApprover} {
			if r := s.do(t, http.MethodGet, path, secret, ""); r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
		}
		expectError(t, s.do(t, http.MethodGet, path, secretGateway, ""), http.StatusForbidden, codeForbidden)
		expectError(t, s.do(t, http.MethodGet, path, "", ""), http.StatusUnauthorized, codeUnauthorized)
		expectError(t, s.do(t, http.MethodGet, path, secretBad, ""), http.StatusUnauthorized, codeUnauthorized)
		expectError(t, s.do(t, http.MethodPost, path, secretOperator, ""), http.StatusMethodNotAllowed, codeMethodNotAllowed)
	}

	// events: the rows in seq order, paged by next_after.
	var all wire.HistoryPageJSON
	if keys := decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/events", secretAuditor, ""), &all); !slices.Equal(keys, []string{"events", "next_after", "sku"}) {
		t.Fatalf("events body keys %v", keys)
	}
	if all.SKU != "au-1" || len(all.Events) != 5 || all.NextAfter != nil {
		t.Fatalf("events: %+v", all)
	}
	var row map[string]any
	if err := json.Unmarshal(mustMarshal(t, all.Events[1]), &row); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"event_id", "sku", "seq", "type", "delta", "qty", "balance_after", "user_id", "request_id", "actor", "reason", "occurred_at", "recorded_at", "stream_id", "prev_hash", "hash"} {
		if _, ok := row[col]; !ok {
			t.Fatalf("event lacks %s: %v", col, row)
		}
	}
	if e := all.Events[3]; e.Type != "released" || e.UserID != "bob" || e.Reason != "payment timeout" || e.Delta != 1 {
		t.Fatalf("release row: %+v", e)
	}
	var page wire.HistoryPageJSON
	decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/events?limit=2&after=1", secretAuditor, ""), &page)
	if len(page.Events) != 2 || page.Events[0].Seq != 2 || page.NextAfter == nil || *page.NextAfter != 3 {
		t.Fatalf("events after 1, limit 2: %+v", page)
	}
	decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/events?after=5", secretAuditor, ""), &page)
	if len(page.Events) != 0 || page.NextAfter != nil || !strings.Contains(string(s.do(t, http.MethodGet, "/v1/skus/au-1/events?after=5", secretAuditor, "").body), `"events":[]`) {
		t.Fatalf("events after the last: %+v", page)
	}

	// balance: the stock at an instant.
	var bal wire.StockAtJSON
	at := before.In(time.FixedZone("", 8*3600)).Format(time.RFC3339Nano)
	if keys := decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/balance?at="+url.QueryEscape(at), secretAuditor, ""), &bal); !slices.Equal(keys, []string{"at", "sku", "stock"}) {
		t.Fatalf("balance body keys %v", keys)
	}
	if bal.SKU != "au-1" || bal.Stock != 8 || !bal.At.Equal(before) {
		t.Fatalf("balance at %s: %+v, want 8", at, bal)
	}
	decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/balance?at=2000-01-01T00:00:00Z", secretAuditor, ""), &bal)
	if bal.Stock != 0 {
		t.Fatalf("balance before the sku existed: %+v", bal)
	}
	decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/balance?at="+url.QueryEscape(time.Now().Add(time.Minute).Format(time.RFC3339)), secretAuditor, ""), &bal)
	if bal.Stock != 7 {
		t.Fatalf("balance in a minute: %+v, want 7", bal)
	}

	// buyers: who holds units after releases.
	var buyers wire.BuyersJSON
	if keys := decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/skus/au-1/buyers", secretAuditor, ""), &buyers); !slices.Equal(keys, []string{"buyers", "next_after", "sku"}) {
		t.Fatalf("buyers body keys %v", keys)
	}
	if want := []wire.HoldingJSON{{UserID: odd, Qty: 2}, {UserID: "cy", Qty: 1}}; buyers.SKU != "au-1" || !slices.Equal(buyers.Buyers, want) {
		t.Fatalf("buyers: %+v, want %+v", buyers, want)
	}

	// purchases: one user's rows, paged by an opaque cursor.
	var up wire.UserPageJSON
	if keys := decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/users/bob/purchases?limit=1", secretAuditor, ""), &up); !slices.Equal(keys, []string{"events", "next_after", "user_id"}) {
		t.Fatalf("purchases body keys %v", keys)
	}
	if up.UserID != "bob" || len(up.Events) != 1 || up.Events[0].Type != "deducted" || up.NextAfter == nil {
		t.Fatalf("bob's first page: %+v", up)
	}
	decodeJSONBody(t, s.do(t, http.MethodGet, "/v1/users/bob/purchases?limit=1&after="+*up.NextAfter, secretAuditor, ""), &up)
	if len(up.Events) != 1 || up.Events[0].Type != "released" || up.NextAfter != nil {
		t.Fatalf("bob's second page: %+v", up)
	}
	decodeJSONBody(t, s.do(t, http.MethodGet, oddPath, secretAuditor, ""), &up)
	if up.UserID != odd || len(up.Events) != 1 || up.Events[0].Qty != 2 {
		t.Fatalf("purchases of %q: %+v", odd, up)
	}

	// Bad input: 400 naming the parameter, and 404 for an undefined SKU.
	for _, tc := range []struct{ path, field string }{
		{"/v1/skus/au-1/events?limit=0", "limit"},
		{"/v1/skus/au-1/events?limit=1001", "limit"},
		{"/v1/skus/au-1/events?limit=ten", "limit"},
		{"/v1/skus/au-1/events?after=-1", "after"},
		{"/v1/skus/au-1/events?after=1.5", "after"},
		{"/v1/skus/au-1/events?after=", "after"},
		{"/v1/skus/au-1/events?limt=5", "limt"},
		{"/v1/skus/au-1/events?limit=1&limit=2", "limit"},
		{"/v1/skus/au-1/balance", "at"},
		{"/v1/skus/au-1/balance?at=yesterday", "at"},
		{"/v1/skus/au-1/balance?at=2026-05-01T20:00:00+08:00", "%2B"}, // the + arrived as a space
		{"/v1/skus/au-1/buyers?limit=0", "limit"},                     // limit is a parameter since buyers are paged (issue 10, item 21)
		{"/v1/skus/bad%7B/events", "sku"},
		{"/v1/skus/bad%7B/balance?at=2026-05-01T12:00:00Z", "sku"},
		{"/v1/skus/bad%7B/buyers", "sku"},
		{"/v1/users/bob/purchases?after=nope", "after"},
		{"/v1/users/bob/purchases?after=", "after"},
		{"/v1/users/bob/purchases?limit=-3", "limit"},
		{"/v1/users/" + strings.Repeat("u", 129) + "/purchases", "user_id"},
	} {
		e := expectError(t, s.do(t, http.MethodGet, tc.path, secretAuditor, ""), http.StatusBadRequest, "invalid_request")
		if e.Field != tc.field && !strings.Contains(e.Detail, tc.field) {
			t.Fatalf("GET %s: field %q, detail %q; want %s named", tc.path, e.Field, e.Detail, tc.field)
		}
	}
	for _, path := range []string{"/v1/skus/ghost/events", "/v1/skus/ghost/balance?at=2026-05-01T12:00:00Z", "/v1/skus/ghost/buyers"} {
		expectError(t, s.do(t, http.MethodGet, path, secretAuditor, ""), http.StatusNotFound, "not_found", "ghost")
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
