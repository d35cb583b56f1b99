package redisinventory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/driven/redisinventory"
	"github.com/invledger/invledger/domain"
)

func TestParseEntry(t *testing.T) {
	t.Parallel()
	const id = "0190b5a4-7a52-7c3e-9d1b-001234567890"
	cases := []struct {
		name   string
		fields map[string]string
		want   domain.Event
	}{
		{"packed deducted", map[string]string{"e": id + " deducted sku:1 7 2 93", "user": "u 1", "request_id": "r:1", redisinventory.StreamIDField: "1764500000123-0"},
			domain.Event{ID: id, Type: domain.EventDeducted, SKU: "sku:1", Seq: 7, Qty: 2, Delta: -2, Balance: 93, User: "u 1", RequestID: "r:1",
				OccurredAt: time.UnixMilli(1764500000123).UTC(), StreamID: "1764500000123-0"}},
		{"packed adjusted down", map[string]string{"e": id + " adjusted s 9 -3 90", "actor": "a+b", "reason": "count", redisinventory.StreamIDField: "5-1"},
			domain.Event{ID: id, Type: domain.EventAdjusted, SKU: "s", Seq: 9, Qty: 3, Delta: -3, Balance: 90, Actor: "a+b", Reason: "count",
				OccurredAt: time.UnixMilli(5).UTC(), StreamID: "5-1"}},
		{"packed stocked", map[string]string{"e": id + " stocked s 1 100 100", redisinventory.StreamIDField: "5-0"},
			domain.Event{ID: id, Type: domain.EventStocked, SKU: "s", Seq: 1, Qty: 100, Delta: 100, Balance: 100, OccurredAt: time.UnixMilli(5).UTC(), StreamID: "5-0"}},
		{"packed released", map[string]string{"e": id + " released s 4 1 8", "user": "u", "request_id": "r", "reason": "why", redisinventory.StreamIDField: "9-0"},
			domain.Event{ID: id, Type: domain.EventReleased, SKU: "s", Seq: 4, Qty: 1, Delta: 1, Balance: 8, User: "u", RequestID: "r", Reason: "why",
				OccurredAt: time.UnixMilli(9).UTC(), StreamID: "9-0"}},
	}
	for _, c := range cases {
		got, err := redisinventory.ParseEntry(c.fields)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v\nwant %+v", c.name, got, err, c.want)
		}
	}
	for name, fields := range map[string]map[string]string{
		"five values":    {"e": id + " deducted s 7 2", "user": "u", "request_id": "r", redisinventory.StreamIDField: "1-0"},
		"unknown type":   {"e": id + " stolen s 7 2 3", redisinventory.StreamIDField: "1-0"},
		"no user":        {"e": id + " deducted s 7 2 3", "request_id": "r", redisinventory.StreamIDField: "1-0"},
		"seq not number": {"e": id + " deducted s x 2 3", "user": "u", "request_id": "r", redisinventory.StreamIDField: "1-0"},
		"no stream id":   {"e": id + " stocked s 1 2 2"},
		"no e": {"event_id": id, "type": "stocked", "sku": "s", "seq": "1", "qty": "1", "delta": "1", "balance": "1", "ts": "1",
			redisinventory.StreamIDField: "1-0"},
	} {
		if _, err := redisinventory.ParseEntry(fields); !errors.Is(err, redisinventory.ErrMalformedEntry) {
			t.Errorf("%s: %v, want ErrMalformedEntry", name, err)
		}
	}
}

// FuzzParseEntry checks that the stream decoder never panics and that what
// it accepts is an event the ledger can hold.
func FuzzParseEntry(f *testing.F) {
	f.Add("0190b5a4-7a52-7c3e-9d1b-001234567890 deducted s 7 2 93", "u", "r", "1764500000123-0")
	f.Add("0190b5a4-7a52-7c3e-9d1b-001234567890 adjusted s 2 -5 0", "", "", "1-1")
	f.Add("x  y", "", "", "")
	f.Fuzz(func(t *testing.T, packed, user, req, streamID string) {
		e, err := redisinventory.ParseEntry(map[string]string{"e": packed, "user": user, "request_id": req, "actor": user,
			redisinventory.StreamIDField: streamID})
		if err != nil {
			if !errors.Is(err, redisinventory.ErrMalformedEntry) {
				t.Fatalf("error %v is not ErrMalformedEntry", err)
			}
			return
		}
		if e.Seq <= 0 || e.ID == "" || e.StreamID == "" {
			t.Fatalf("accepted %+v", e)
		}
		if _, err := domain.ParseEventType(string(e.Type)); err != nil {
			t.Fatalf("accepted type %q", e.Type)
		}
		if _, err := domain.NewSKUID(e.SKU); err != nil {
			t.Fatalf("accepted sku %q", e.SKU)
		}
	})
}

// FuzzParseReceipt checks that a receipt the restore writes reads back as
// the purchase it was written from, and that no value panics the reader.
func FuzzParseReceipt(f *testing.F) {
	f.Add("u:1", "0190b5a4-7a52-7c3e-9d1b-001234567890", int64(3), int64(7), int64(2), true, int64(9), "R1:x:2")
	f.Fuzz(func(t *testing.T, user, eventID string, seq, remaining, qty int64, released bool, releaseSeq int64, raw string) {
		_, _ = redisinventory.ParseReceipt(raw)
		if strings.Contains(eventID, ":") {
			return // event ids are UUIDs
		}
		p := domain.Purchase{User: user, Qty: qty, EventID: eventID, Seq: seq, Remaining: remaining}
		if released {
			p.Released, p.ReleaseSeq, p.ReleaseEventID = true, releaseSeq, eventID
		}
		got, err := redisinventory.ParseReceipt(redisinventory.ReceiptValue(p))
		if err != nil || got != p {
			t.Fatalf("%+v read back as %+v %v", p, got, err)
		}
	})
}
