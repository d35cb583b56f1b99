package eventjson_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/internal/eventjson"
	"github.com/invledger/invledger/domain"
)

// TestAnEventKeepsEveryFieldInItsJSON: every field of a domain event that
// leaves the process reaches the API's event JSON under its name, in UTC,
// and the hold's fields are left out of an event without a hold.
func TestAnEventKeepsEveryFieldInItsJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	hold := domain.Event{ID: "0b8f3c3e-1a2b-4c5d-8e9f-0123456789ab", SKU: "sku-1", Seq: 7, Type: domain.EventReserved, Delta: -2, Qty: 2,
		Balance: 40, User: "u-1", RequestID: "r-1", Actor: "a", Reason: "why", OccurredAt: at,
		HoldID: "h-1", OrderID: "o-1", ExpiresAt: at.Add(15 * time.Minute)}
	b, err := json.Marshal(eventjson.New(hold))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"event_id": hold.ID, "sku": "sku-1", "seq": 7.0, "type": "reserved", "delta": -2.0, "qty": 2.0,
		"balance_after": 40.0, "user_id": "u-1", "request_id": "r-1", "actor": "a", "reason": "why",
		"occurred_at": "2026-12-02T09:00:00Z", "hold_id": "h-1", "order_id": "o-1", "expires_at": "2026-12-02T09:15:00Z"}
	if len(got) != len(want) {
		t.Errorf("keys %v, want those of %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}

	plain := hold
	plain.Type, plain.HoldID, plain.OrderID, plain.ExpiresAt, plain.User, plain.Actor, plain.Reason = domain.EventDeducted, "", "", time.Time{}, "", "", ""
	b, err = json.Marshal(eventjson.New(plain))
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]any{}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"hold_id", "order_id", "expires_at"} {
		if _, ok := got[k]; ok {
			t.Errorf("an event without a hold has %s: %s", k, b)
		}
	}
	for _, k := range []string{"user_id", "actor", "reason"} {
		if v, ok := got[k]; !ok || v != "" {
			t.Errorf("an absent %s is %v, want an empty string (present): %s", k, v, b)
		}
	}
}
