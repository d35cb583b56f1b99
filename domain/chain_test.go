package domain_test

import (
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
)

// TestSealHashCoversEveryFieldOfEveryType: for every event type, changing
// any one sealed field, or the previous link, changes the link, so an edit
// of any column a reader sees breaks the chain; the hold fields included,
// whatever the type.
func TestSealHashCoversEveryFieldOfEveryType(t *testing.T) {
	t.Parallel()
	edits := map[string]func(*domain.Event){
		"event_id":    func(e *domain.Event) { e.ID = "00000000-0000-7000-8000-000000000002" },
		"sku":         func(e *domain.Event) { e.SKU = "other" },
		"seq":         func(e *domain.Event) { e.Seq++ },
		"qty":         func(e *domain.Event) { e.Qty++ },
		"delta":       func(e *domain.Event) { e.Delta++ },
		"balance":     func(e *domain.Event) { e.Balance++ },
		"user":        func(e *domain.Event) { e.User = "mallory" },
		"request_id":  func(e *domain.Event) { e.RequestID = "r2" },
		"actor":       func(e *domain.Event) { e.Actor = "eve" },
		"reason":      func(e *domain.Event) { e.Reason = "why not" },
		"occurred_at": func(e *domain.Event) { e.OccurredAt = e.OccurredAt.Add(time.Microsecond) },
		"hold_id":     func(e *domain.Event) { e.HoldID = "00000000-0000-7000-8000-000000000004" },
		"order_id":    func(e *domain.Event) { e.OrderID = "ord-2" },
		"expires_at":  func(e *domain.Event) { e.ExpiresAt = e.ExpiresAt.Add(time.Millisecond) },
		"no deadline": func(e *domain.Event) { e.ExpiresAt = time.Time{} },
	}
	for _, typ := range []domain.EventType{domain.EventStocked, domain.EventDeducted, domain.EventReleased, domain.EventAdjusted,
		domain.EventClosed, domain.EventReserved, domain.EventConfirmed, domain.EventCancelled, domain.EventExpired} {
		base := domain.Event{ID: "00000000-0000-7000-8000-000000000001", Type: typ, SKU: "s", Seq: 3, Qty: 2, Delta: -2,
			Balance: 8, User: "u", RequestID: "r", Actor: "a", Reason: "x", OccurredAt: time.UnixMicro(1764500000123456),
			HoldID: "00000000-0000-7000-8000-000000000003", OrderID: "ord-1", ExpiresAt: time.UnixMilli(1764500060123)}
		want := domain.SealHash("prev", base)
		if domain.SealHash("other", base) == want {
			t.Errorf("%s: the link does not depend on the previous one", typ)
		}
		for field, edit := range edits {
			e := base
			edit(&e)
			if domain.SealHash("prev", e) == want {
				t.Errorf("%s: editing %s leaves the link unchanged", typ, field)
			}
		}
	}
}

// TestChainVerifierNamesTheFirstBrokenLink checks an intact chain of three
// seals, then one whose second seal points elsewhere, names an unknown
// algorithm, or hashes other fields.
func TestChainVerifierNamesTheFirstBrokenLink(t *testing.T) {
	t.Parallel()
	events := make([]domain.Event, 3)
	seals := make([]domain.Seal, 3)
	prev := ""
	for i := range events {
		events[i] = domain.Event{ID: "e", Type: domain.EventDeducted, SKU: "s", Seq: int64(i + 1), Qty: 1, Delta: -1, Balance: int64(9 - i)}
		seals[i] = domain.NextSeal(domain.SealKeys{}, prev, events[i])
		prev = seals[i].Hash
	}
	var v domain.ChainVerifier
	for i := range events {
		if err := v.Check(events[i], seals[i]); err != nil {
			t.Fatalf("intact chain, seq %d: %v", i+1, err)
		}
	}
	for name, tamper := range map[string]func(*domain.Event, *domain.Seal){
		"relinked":  func(_ *domain.Event, s *domain.Seal) { s.PrevHash = "elsewhere" },
		"algorithm": func(_ *domain.Event, s *domain.Seal) { s.Algorithm = "md5" },
		"edited":    func(e *domain.Event, _ *domain.Seal) { e.User = "mallory" },
	} {
		e, s := events[1], seals[1]
		tamper(&e, &s)
		var v domain.ChainVerifier
		if err := v.Check(events[0], seals[0]); err != nil {
			t.Fatal(err)
		}
		if err := v.Check(e, s); !errors.Is(err, domain.ErrCorruptLedger) {
			t.Errorf("%s seq 2: %v, want ErrCorruptLedger", name, err)
		}
	}
}
