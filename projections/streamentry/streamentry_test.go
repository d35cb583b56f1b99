package streamentry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

func TestParseEntry(t *testing.T) {
	t.Parallel()
	const id = "0190b5a4-7a52-7c3e-9d1b-001234567890"
	cases := []struct {
		name   string
		fields map[string]string
		want   domain.Event
	}{
		{"packed deducted", map[string]string{"e": id + " deducted sku:1 7 2 93", "user": "u 1", "request_id": "r:1", streamentry.StreamIDField: "1764500000123-0"},
			domain.Event{ID: id, Type: domain.EventDeducted, SKU: "sku:1", Seq: 7, Qty: 2, Delta: -2, Balance: 93, User: "u 1", RequestID: "r:1",
				OccurredAt: time.UnixMilli(1764500000123).UTC(), StreamID: "1764500000123-0"}},
		{"packed adjusted down", map[string]string{"e": id + " adjusted s 9 -3 90", "actor": "a+b", "reason": "count", streamentry.StreamIDField: "5-1"},
			domain.Event{ID: id, Type: domain.EventAdjusted, SKU: "s", Seq: 9, Qty: 3, Delta: -3, Balance: 90, Actor: "a+b", Reason: "count",
				OccurredAt: time.UnixMilli(5).UTC(), StreamID: "5-1"}},
		{"packed stocked", map[string]string{"e": id + " stocked s 1 100 100", streamentry.StreamIDField: "5-0"},
			domain.Event{ID: id, Type: domain.EventStocked, SKU: "s", Seq: 1, Qty: 100, Delta: 100, Balance: 100, OccurredAt: time.UnixMilli(5).UTC(), StreamID: "5-0"}},
		{"packed released", map[string]string{"e": id + " released s 4 1 8", "user": "u", "request_id": "r", "reason": "why", streamentry.StreamIDField: "9-0"},
			domain.Event{ID: id, Type: domain.EventReleased, SKU: "s", Seq: 4, Qty: 1, Delta: 1, Balance: 8, User: "u", RequestID: "r", Reason: "why",
				OccurredAt: time.UnixMilli(9).UTC(), StreamID: "9-0"}},
	}
	for _, c := range cases {
		got, err := streamentry.ParseEntry(c.fields)
		if err != nil || got != c.want {
			t.Errorf("%s: %+v %v\nwant %+v", c.name, got, err, c.want)
		}
	}
	for name, fields := range map[string]map[string]string{
		"five values":    {"e": id + " deducted s 7 2", "user": "u", "request_id": "r", streamentry.StreamIDField: "1-0"},
		"unknown type":   {"e": id + " stolen s 7 2 3", streamentry.StreamIDField: "1-0"},
		"no user":        {"e": id + " deducted s 7 2 3", "request_id": "r", streamentry.StreamIDField: "1-0"},
		"seq not number": {"e": id + " deducted s x 2 3", "user": "u", "request_id": "r", streamentry.StreamIDField: "1-0"},
		"no stream id":   {"e": id + " stocked s 1 2 2"},
		"no e": {"event_id": id, "type": "stocked", "sku": "s", "seq": "1", "qty": "1", "delta": "1", "balance": "1", "ts": "1",
			streamentry.StreamIDField: "1-0"},
	} {
		if _, err := streamentry.ParseEntry(fields); !errors.Is(err, streamentry.ErrMalformedEntry) {
			t.Errorf("%s: %v, want ErrMalformedEntry", name, err)
		}
	}
}

func TestParseEntryEvents(t *testing.T) {
	t.Parallel()
	const a, b, c = "0190b5a4-7a52-7c3e-9d1b-00000000000a", "0190b5a4-7a52-7c3e-9d1b-00000000000b", "0190b5a4-7a52-7c3e-9d1b-00000000000c"
	at := time.UnixMilli(1764500000123).UTC()
	t.Run("every event of a batch entry, in order, each with its line of every column", func(t *testing.T) {
		fields := map[string]string{
			"e":                       a + " deducted s1 7 2 93\n" + b + " reserved s2 3 1 9\n" + c + " deducted s1 8 1 92",
			"user":                    "u1\nu2\nu3",
			"request_id":              "r1\nr2\nr3",
			"hold_id":                 "\nh2\n",
			"expires_at":              "\n1764500060000\n",
			"tp":                      "00-aa-bb-01\n\n",
			streamentry.StreamIDField: "1764500000123-4", "_redis_node_runs": "run",
		}
		got, err := streamentry.ParseEntryEvents(fields)
		if err != nil {
			t.Fatal(err)
		}
		want := []domain.Event{
			{ID: a, Type: domain.EventDeducted, SKU: "s1", Seq: 7, Qty: 2, Delta: -2, Balance: 93, User: "u1", RequestID: "r1",
				TraceParent: "00-aa-bb-01", OccurredAt: at, StreamID: "1764500000123-4"},
			{ID: b, Type: domain.EventReserved, SKU: "s2", Seq: 3, Qty: 1, Delta: -1, Balance: 9, User: "u2", RequestID: "r2",
				HoldID: "h2", ExpiresAt: time.UnixMilli(1764500060000).UTC(), OccurredAt: at, StreamID: "1764500000123-4"},
			{ID: c, Type: domain.EventDeducted, SKU: "s1", Seq: 8, Qty: 1, Delta: -1, Balance: 92, User: "u3", RequestID: "r3",
				OccurredAt: at, StreamID: "1764500000123-4"},
		}
		if len(got) != len(want) {
			t.Fatalf("%d events, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i].Err != nil || got[i].Event != want[i] {
				t.Errorf("event %d: %+v %v\nwant %+v", i, got[i].Event, got[i].Err, want[i])
			}
			// A dead letter of one event keeps its own fields, which decode
			// to the same event.
			one := streamentry.EventFields(fields, i)
			if one["_redis_node_runs"] != "run" || strings.Contains(one["e"], "\n") {
				t.Errorf("event %d: fields %v", i, one)
			}
			if e, err := streamentry.ParseEntry(one); err != nil || e != want[i] {
				t.Errorf("event %d alone: %+v %v", i, e, err)
			}
		}
		if _, err := streamentry.ParseEntry(fields); !errors.Is(err, streamentry.ErrMalformedEntry) {
			t.Errorf("ParseEntry of three events: %v, want ErrMalformedEntry", err)
		}
		if events, err := streamentry.ParseEvents(fields); err != nil || len(events) != 3 || events[2] != want[2] {
			t.Errorf("ParseEvents: %+v %v", events, err)
		}
	})
	t.Run("a malformed event fails alone", func(t *testing.T) {
		fields := map[string]string{"e": a + " deducted s 7 2 93\n" + b + " deducted s x 1 92\n" + c + " deducted s 9 1 91",
			"user": "u1\nu2\n", "request_id": "r1\nr2\nr3", streamentry.StreamIDField: "5-0"}
		got, err := streamentry.ParseEntryEvents(fields)
		if err != nil || len(got) != 3 {
			t.Fatalf("%+v %v", got, err)
		}
		if got[0].Err != nil || got[0].Event.Seq != 7 {
			t.Errorf("event 0: %+v %v", got[0].Event, got[0].Err)
		}
		for _, i := range []int{1, 2} { // seq not a number; user missing
			if !errors.Is(got[i].Err, streamentry.ErrMalformedEntry) {
				t.Errorf("event %d: %v, want ErrMalformedEntry", i, got[i].Err)
			}
			if _, err := streamentry.ParseEntry(streamentry.EventFields(fields, i)); err == nil || err.Error() != got[i].Err.Error() {
				t.Errorf("event %d alone: %v, want %v", i, err, got[i].Err)
			}
		}
		if _, err := streamentry.ParseEvents(fields); !errors.Is(err, streamentry.ErrMalformedEntry) || !strings.Contains(err.Error(), "event 2 of 3") {
			t.Errorf("ParseEvents: %v", err)
		}
	})
	t.Run("a column whose line count is not e's makes the whole entry malformed", func(t *testing.T) {
		for name, fields := range map[string]map[string]string{
			"short":  {"e": a + " stocked s 1 2 2\n" + b + " stocked s 2 2 4", "reason": "x", streamentry.StreamIDField: "5-0"},
			"long":   {"e": a + " stocked s 1 2 2\n" + b + " stocked s 2 2 4", "actor": "x\ny\nz", streamentry.StreamIDField: "5-0"},
			"empty":  {"e": a + " stocked s 1 2 2\n" + b + " stocked s 2 2 4", "order_id": "", streamentry.StreamIDField: "5-0"},
			"future": {"e": a + " stocked s 1 2 2\n" + b + " stocked s 2 2 4", "new": "1", streamentry.StreamIDField: "5-0"},
		} {
			if got, err := streamentry.ParseEntryEvents(fields); !errors.Is(err, streamentry.ErrMalformedEntry) || got != nil {
				t.Errorf("%s: %+v %v, want ErrMalformedEntry", name, got, err)
			}
		}
	})
	t.Run("an entry of one event takes its fields whole, as 1.0.0 wrote them", func(t *testing.T) {
		// A one-event entry never splits, whatever its other fields hold.
		fields := map[string]string{"e": a + " adjusted s 9 -3 90", "actor": "a", "reason": "two\nlines", streamentry.StreamIDField: "5-1"}
		got, err := streamentry.ParseEntryEvents(fields)
		if err != nil || len(got) != 1 || got[0].Err != nil || got[0].Event.Reason != "two\nlines" {
			t.Fatalf("%+v %v", got, err)
		}
		if one := streamentry.EventFields(fields, 0); len(one) != len(fields) || one["reason"] != fields["reason"] {
			t.Errorf("fields of the one event: %v", one)
		}
	})
}

// FuzzParseEntry checks that the stream decoder never panics and that what
// it accepts is an event the ledger can hold.
func FuzzParseEntry(f *testing.F) {
	f.Add("0190b5a4-7a52-7c3e-9d1b-001234567890 deducted s 7 2 93", "u", "r", "1764500000123-0")
	f.Add("0190b5a4-7a52-7c3e-9d1b-001234567890 adjusted s 2 -5 0", "", "", "1-1")
	f.Add("x  y", "", "", "")
	f.Fuzz(func(t *testing.T, packed, user, req, streamID string) {
		e, err := streamentry.ParseEntry(map[string]string{"e": packed, "user": user, "request_id": req, "actor": user,
			streamentry.StreamIDField: streamID})
		if err != nil {
			if !errors.Is(err, streamentry.ErrMalformedEntry) {
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

// FuzzParseEntryEvents checks that the decoder of entries of several
// events never panics, splits an entry into as many events as e has lines
// or refuses it whole, and that each event's own fields (what its dead
// letter keeps) decode alone to the same event or the same error.
func FuzzParseEntryEvents(f *testing.F) {
	const id = "0190b5a4-7a52-7c3e-9d1b-001234567890"
	f.Add(id+" deducted s 7 2 93\n"+id+" deducted s 8 1 92", "u\nv", "r\ns", "", "1764500000123-0")
	f.Add(id+" reserved s 7 2 93\n"+id+" released s 8 1 92", "u\nv", "r\ns", "h\n", "1-1")
	f.Add(id+" stocked s 1 2 2", "", "", "x\ny", "1-0")
	f.Add("\n\n", "\n\n", "", "", "")
	f.Fuzz(func(t *testing.T, packed, user, req, holdID, streamID string) {
		fields := map[string]string{"e": packed, "user": user, "request_id": req, "hold_id": holdID, "actor": user,
			streamentry.StreamIDField: streamID}
		got, err := streamentry.ParseEntryEvents(fields)
		if err != nil {
			if !errors.Is(err, streamentry.ErrMalformedEntry) || got != nil {
				t.Fatalf("%+v, error %v", got, err)
			}
			return
		}
		if want := strings.Count(packed, "\n") + 1; len(got) != want {
			t.Fatalf("%d events of %d lines", len(got), want)
		}
		for i, ee := range got {
			if ee.Err == nil && (ee.Event.Seq <= 0 || ee.Event.ID == "" || ee.Event.StreamID != streamID) {
				t.Fatalf("accepted %+v", ee.Event)
			}
			if ee.Err != nil && !errors.Is(ee.Err, streamentry.ErrMalformedEntry) {
				t.Fatalf("error %v is not ErrMalformedEntry", ee.Err)
			}
			alone, err := streamentry.ParseEntry(streamentry.EventFields(fields, i))
			if alone != ee.Event || (err == nil) != (ee.Err == nil) || (err != nil && err.Error() != ee.Err.Error()) {
				t.Fatalf("event %d: %+v %v, alone %+v %v", i, ee.Event, ee.Err, alone, err)
			}
		}
	})
}
