package domain_test

import (
	"errors"
	"strings"
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

// TestSealHashIsRelease100s: the unkeyed link is byte for byte the one
// release 1.0.0 stored (computed by 1.0.0's SealHash), so its chains still
// verify after the upgrade.
func TestSealHashIsRelease100s(t *testing.T) {
	t.Parallel()
	e := domain.Event{ID: "00000000-0000-7000-8000-000000000001", Type: domain.EventReserved, SKU: "s", Seq: 3, Qty: 2, Delta: -2,
		Balance: 8, User: "u", RequestID: "r", Actor: "a", Reason: "x", OccurredAt: time.UnixMicro(1764500000123456),
		HoldID: "00000000-0000-7000-8000-000000000003", OrderID: "ord-1", ExpiresAt: time.UnixMilli(1764500060123)}
	if got, want := domain.SealHash("prev", e), "0ff37f51dbe894398118081918ffff7580dc7794dee2d03c09fc185e845b3915"; got != want {
		t.Fatalf("SealHash = %s, release 1.0.0 stored %s", got, want)
	}
}

// TestKeyedChainNeedsTheKey: a keyed chain verifies with its key; a keyed
// seal recomputed with the public formula, or under another key, is a
// break; a seal whose key is not given cannot be checked; an unkeyed seal
// may precede keyed ones but not follow them.
func TestKeyedChainNeedsTheKey(t *testing.T) {
	t.Parallel()
	keys, err := domain.ParseSealKeys("k1:0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	other, err := domain.ParseSealKeys("k1:fedcba9876543210fedcba9876543210")
	if err != nil {
		t.Fatal(err)
	}
	events := make([]domain.Event, 3)
	seals := make([]domain.Seal, 3)
	prev := ""
	for i := range events {
		events[i] = domain.Event{ID: "e", Type: domain.EventDeducted, SKU: "s", Seq: int64(i + 1), Qty: 1, Delta: -1, Balance: int64(9 - i)}
		k := keys
		if i == 0 {
			k = domain.SealKeys{} // sealed before the ledger was keyed
		}
		seals[i] = domain.NextSeal(k, prev, events[i])
		prev = seals[i].Hash
	}
	if seals[0].Algorithm != domain.SealSHA256 || seals[1].Algorithm != domain.SealHMACSHA256 || seals[1].KeyID != "k1" {
		t.Fatalf("seals %+v", seals)
	}
	check := func(k domain.SealKeys, tamper func(*domain.Event, *domain.Seal)) error {
		v := domain.ChainVerifier{Keys: k}
		for i := range events {
			e, s := events[i], seals[i]
			if i == 2 && tamper != nil {
				tamper(&e, &s)
			}
			if err := v.Check(e, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check(keys, nil); err != nil {
		t.Fatalf("intact keyed chain: %v", err)
	}
	for name, tamper := range map[string]func(*domain.Event, *domain.Seal){
		"edited": func(e *domain.Event, _ *domain.Seal) { e.User = "mallory" },
		"public formula": func(e *domain.Event, s *domain.Seal) {
			e.User = "mallory"
			*s = domain.NextSeal(domain.SealKeys{}, s.PrevHash, *e)
		},
		"other key": func(e *domain.Event, s *domain.Seal) { e.User = "mallory"; *s = domain.NextSeal(other, s.PrevHash, *e) },
	} {
		if err := check(keys, tamper); !errors.Is(err, domain.ErrCorruptLedger) {
			t.Errorf("%s: %v, want ErrCorruptLedger", name, err)
		}
	}
	if err := check(domain.SealKeys{}, nil); !errors.Is(err, domain.ErrSealKeyMissing) || !strings.Contains(err.Error(), `"k1"`) {
		t.Errorf("without the key: %v, want ErrSealKeyMissing naming k1", err)
	}
}
