package domain_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
)

func (l *ledger) reserve(user, req string, qty int64) *ledger {
	id := domain.HoldIDFor(skuID(l.sku), mustReq(req)).String()
	return l.add(domain.Event{Type: domain.EventReserved, Qty: qty, Delta: -qty, User: user, RequestID: req,
		HoldID: id, ExpiresAt: t0.Add(time.Hour)})
}

func (l *ledger) endHold(typ domain.EventType, user, req string, qty int64) *ledger {
	id := domain.HoldIDFor(skuID(l.sku), mustReq(req)).String()
	return l.add(domain.Event{Type: typ, Qty: qty, Delta: typ.DeltaSign() * qty, User: user, RequestID: req, HoldID: id})
}

func skuID(s string) domain.SKUID {
	id, err := domain.NewSKUID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func mustReq(s string) domain.RequestID {
	id, err := domain.NewRequestID(s)
	if err != nil {
		panic(err)
	}
	return id
}

func TestFoldHoldsConserveUnits(t *testing.T) {
	events := newLedger().stocked(10).
		reserve("alice", "h1", 2).reserve("bob", "h2", 3).reserve("carol", "h3", 1).deduct("dave", "d1", 1).
		endHold(domain.EventConfirmed, "alice", "h1", 2).
		endHold(domain.EventCancelled, "bob", "h2", 3).
		release("alice", "h1", 2).events
	s, err := domain.Fold(testSKU, events)
	if err != nil {
		t.Fatal(err)
	}
	// carol's 1 is held; dave's 1 is sold; alice's 2 were confirmed, then released.
	if s.Stock != 8 || s.Held != 1 || s.Sold != 1 || s.Supplied != 10 {
		t.Fatalf("stock %d held %d sold %d supplied %d, want 8 1 1 10", s.Stock, s.Held, s.Sold, s.Supplied)
	}
	if s.OpenHolds() != 1 {
		t.Fatalf("open holds %d, want 1", s.OpenHolds())
	}
	if want := map[string]int64{"carol": 1, "dave": 1}; len(s.Buyers) != 2 || s.Buyers["carol"] != 1 || s.Buyers["dave"] != 1 {
		t.Fatalf("buyers %v, want %v: held and sold units count against the limit, ended holds do not", s.Buyers, want)
	}
	h1 := s.Holds[domain.HoldIDFor(skuID(testSKU), mustReq("h1")).String()]
	if h1.Status != domain.HoldConfirmed || h1.EndSeq != 6 || h1.Seq != 2 {
		t.Fatalf("hold h1 = %+v", h1)
	}
	if p := s.Requests["h1"]; !p.Released || p.Qty != 2 || p.Seq != 2 {
		t.Fatalf("a confirmed hold is a purchase its release gives back: %+v", p)
	}
}

func TestFoldRefusesHoldsThatEndTwiceOrDoNotAddUp(t *testing.T) {
	base := func() *ledger { return newLedger().stocked(10).reserve("alice", "h1", 2) }
	for _, tc := range []struct {
		name   string
		events []domain.Event
		msg    string
	}{
		{"confirm after expiry", base().endHold(domain.EventExpired, "alice", "h1", 2).endHold(domain.EventConfirmed, "alice", "h1", 2).events, "ended hold"},
		{"cancel twice", base().endHold(domain.EventCancelled, "alice", "h1", 2).endHold(domain.EventCancelled, "alice", "h1", 2).events, "ended hold"},
		{"unknown hold", newLedger().stocked(10).endHold(domain.EventExpired, "alice", "h1", 2).events, "unknown or ended hold"},
		{"expiry of another qty", base().endHold(domain.EventExpired, "alice", "h1", 1).events, "does not match hold"},
		{"confirm that moves units", base().endHold(domain.EventConfirmed, "alice", "h1", 2).mutateLast(func(e *domain.Event) {
			e.Delta, e.Balance = 2, 10
		}).events, "does not match hold"},
		{"reserve twice", base().reserve("alice", "h1", 2).events, "reserved twice"},
		{"deduct by a hold's request id", base().deduct("alice", "h1", 1).events, "after it reserved a hold"},
		{"reserve by a deduction's request id", newLedger().stocked(10).deduct("alice", "d1", 1).reserve("alice", "d1", 1).events, "after it deducted"},
		{"hold id of another request", base().mutateLast(func(e *domain.Event) { e.HoldID = "x" }).events, "is not the one of request id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := domain.Fold(testSKU, tc.events)
			if !errors.Is(err, domain.ErrCorruptLedger) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Fold error = %v, want corrupt ledger with %q", err, tc.msg)
			}
		})
	}
}

func TestHoldTTLBounds(t *testing.T) {
	cfg := domain.HoldConfig{MaxTTL: 2 * time.Minute}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.DefaultTTL != 2*time.Minute {
		t.Fatalf("default ttl %s, want the maximum when it is below 900s", cfg.DefaultTTL)
	}
	ttl, err := cfg.NewHoldTTL(nil)
	if err != nil || ttl.Duration() != cfg.DefaultTTL {
		t.Fatalf("absent ttl = %v, %v", ttl.Duration(), err)
	}
	for _, n := range []int64{0, -1, 121, 1 << 62} {
		_, err := cfg.NewHoldTTL(&n)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "ttl_seconds" || !errors.Is(err, domain.ErrInvalidTTL) {
			t.Errorf("ttl %d: err = %v, want a ttl_seconds field error", n, err)
		}
	}
	for _, n := range []int64{1, 120} {
		if ttl, err := cfg.NewHoldTTL(&n); err != nil || ttl.Duration() != time.Duration(n)*time.Second {
			t.Errorf("ttl %d = %v, %v", n, ttl.Duration(), err)
		}
	}
	bad := domain.HoldConfig{MaxTTL: 1500 * time.Millisecond, DefaultTTL: time.Hour}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "MaxTTL") || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("Validate = %v, want both problems", err)
	}
}

func FuzzNewHoldTTL(f *testing.F) {
	for _, n := range []int64{-1, 0, 1, 900, 3600, 3601, 1 << 62} {
		f.Add(n)
	}
	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	f.Fuzz(func(t *testing.T, n int64) {
		ttl, err := cfg.NewHoldTTL(&n)
		if valid := n >= 1 && n <= 3600; valid != (err == nil) {
			t.Fatalf("NewHoldTTL(%d) err = %v", n, err)
		}
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != "ttl_seconds" || ttl.Duration() != 0 {
				t.Fatalf("NewHoldTTL(%d) = %v, %v", n, ttl.Duration(), err)
			}
			return
		}
		if ttl.Duration() != time.Duration(n)*time.Second {
			t.Fatalf("NewHoldTTL(%d) = %v", n, ttl.Duration())
		}
	})
}

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func FuzzNewHoldID(f *testing.F) {
	for _, s := range []string{"", "x", "6F1C1D3E-2B8A-4C53-9A57-5D1E0A7F4B21", "6f1c1d3e-2b8a-4c53-9a57-5d1e0a7f4b21",
		"{6f1c1d3e-2b8a-4c53-9a57-5d1e0a7f4b21}", "urn:uuid:6f1c1d3e-2b8a-4c53-9a57-5d1e0a7f4b21", "6f1c1d3e2b8a4c539a575d1e0a7f4b21"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := domain.NewHoldID(s)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != "hold_id" || id.String() != "" {
				t.Fatalf("NewHoldID(%q) = %q, %v", s, id.String(), err)
			}
			return
		}
		// Accepted ids are canonical, so one hold has one spelling in keys and events.
		if !canonicalUUID.MatchString(id.String()) || !strings.EqualFold(id.String(), s) {
			t.Fatalf("NewHoldID(%q) = %q", s, id.String())
		}
	})
}
