package domain_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
)

const testSKU = "sku-1"

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ledger builds a consistent event list: each helper assigns the next seq and
// the balance that follows from the running stock.
type ledger struct {
	sku    string
	seq    int64
	stock  int64
	events []domain.Event
}

func newLedger() *ledger { return &ledger{sku: testSKU} }

func (l *ledger) add(e domain.Event) *ledger {
	l.seq++
	e.SKU, e.Seq = l.sku, l.seq
	e.ID = fmt.Sprintf("ev-%d", l.seq)
	l.stock += e.Delta
	e.Balance = l.stock
	e.OccurredAt = t0.Add(time.Duration(l.seq) * time.Second)
	l.events = append(l.events, e)
	return l
}

func (l *ledger) stocked(n int64) *ledger {
	return l.add(domain.Event{Type: domain.EventStocked, Qty: n, Delta: n, Actor: "op"})
}

func (l *ledger) deduct(user, req string, qty int64) *ledger {
	return l.add(domain.Event{Type: domain.EventDeducted, Qty: qty, Delta: -qty, User: user, RequestID: req})
}

func (l *ledger) release(user, req string, qty int64) *ledger {
	return l.add(domain.Event{Type: domain.EventReleased, Qty: qty, Delta: qty, User: user, RequestID: req, Actor: "op", Reason: "refund"})
}

func (l *ledger) adjust(delta int64) *ledger {
	return l.add(domain.Event{Type: domain.EventAdjusted, Delta: delta, Actor: "op", Reason: "recount"})
}

// mutateLast rewrites the last event with f.
func (l *ledger) mutateLast(f func(*domain.Event)) *ledger {
	f(&l.events[len(l.events)-1])
	return l
}

func purchase(user string, qty, seq, remaining int64) domain.Purchase {
	return domain.Purchase{User: user, Qty: qty, EventID: fmt.Sprintf("ev-%d", seq), Seq: seq, Remaining: remaining}
}

func released(p domain.Purchase, releaseSeq int64) domain.Purchase {
	p.Released, p.ReleaseEventID, p.ReleaseSeq = true, fmt.Sprintf("ev-%d", releaseSeq), releaseSeq
	return p
}

func TestFoldValid(t *testing.T) {
	tests := []struct {
		name   string
		events []domain.Event
		want   domain.SKUState
	}{
		{
			name:   "no events",
			events: nil,
			want:   domain.SKUState{SKU: testSKU, Buyers: map[string]int64{}, Requests: map[string]domain.Purchase{}, Holds: map[string]domain.Hold{}},
		},
		{
			name:   "stocked only",
			events: newLedger().stocked(10).events,
			want:   domain.SKUState{SKU: testSKU, Stock: 10, Seq: 1, Supplied: 10, Buyers: map[string]int64{}, Requests: map[string]domain.Purchase{}, Holds: map[string]domain.Hold{}},
		},
		{
			name:   "stocked zero",
			events: newLedger().stocked(0).events,
			want:   domain.SKUState{SKU: testSKU, Stock: 0, Seq: 1, Buyers: map[string]int64{}, Requests: map[string]domain.Purchase{}, Holds: map[string]domain.Hold{}},
		},
		{
			name:   "deductions",
			events: newLedger().stocked(10).deduct("alice", "r1", 1).deduct("bob", "r2", 2).deduct("carol", "r3", 7).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 0, Seq: 4, Sold: 10, Supplied: 10,
				Buyers: map[string]int64{"alice": 1, "bob": 2, "carol": 7},
				Requests: map[string]domain.Purchase{
					"r1": purchase("alice", 1, 2, 9),
					"r2": purchase("bob", 2, 3, 7),
					"r3": purchase("carol", 7, 4, 0),
				},
				Holds: map[string]domain.Hold{},
			},
		},
		{
			name:   "deduct then release removes buyer",
			events: newLedger().stocked(5).deduct("alice", "r1", 2).deduct("bob", "r2", 1).release("alice", "r1", 2).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 4, Seq: 4, Sold: 1, Supplied: 5,
				Buyers: map[string]int64{"bob": 1},
				Requests: map[string]domain.Purchase{
					"r1": released(purchase("alice", 2, 2, 3), 4),
					"r2": purchase("bob", 1, 3, 2),
				},
				Holds: map[string]domain.Hold{},
			},
		},
		{
			name:   "release one of two purchases keeps buyer",
			events: newLedger().stocked(5).deduct("alice", "r1", 1).deduct("alice", "r2", 2).release("alice", "r2", 2).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 4, Seq: 4, Sold: 1, Supplied: 5,
				Buyers: map[string]int64{"alice": 1},
				Requests: map[string]domain.Purchase{
					"r1": purchase("alice", 1, 2, 4),
					"r2": released(purchase("alice", 2, 3, 2), 4),
				},
				Holds: map[string]domain.Hold{},
			},
		},
		{
			name:   "release all restores full stock",
			events: newLedger().stocked(3).deduct("alice", "r1", 3).release("alice", "r1", 3).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 3, Seq: 3, Supplied: 3,
				Buyers:   map[string]int64{},
				Requests: map[string]domain.Purchase{"r1": released(purchase("alice", 3, 2, 0), 3)},
				Holds:    map[string]domain.Hold{},
			},
		},
		{
			name:   "adjustments up and down",
			events: newLedger().stocked(10).adjust(5).adjust(-12).adjust(0).adjust(-3).events,
			want:   domain.SKUState{SKU: testSKU, Stock: 0, Seq: 5, Buyers: map[string]int64{}, Requests: map[string]domain.Purchase{}, Holds: map[string]domain.Hold{}},
		},
		{
			name:   "adjust up from zero stock then sell",
			events: newLedger().stocked(0).adjust(4).deduct("alice", "r1", 4).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 0, Seq: 3, Sold: 4, Supplied: 4,
				Buyers:   map[string]int64{"alice": 4},
				Requests: map[string]domain.Purchase{"r1": purchase("alice", 4, 3, 0)},
				Holds:    map[string]domain.Hold{},
			},
		},
		{
			name: "multi-qty purchases by same user",
			events: newLedger().stocked(20).deduct("alice", "r1", 3).deduct("bob", "r2", 1).
				deduct("alice", "r3", 5).deduct("alice", "r4", 2).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 9, Seq: 5, Sold: 11, Supplied: 20,
				Buyers: map[string]int64{"alice": 10, "bob": 1},
				Requests: map[string]domain.Purchase{
					"r1": purchase("alice", 3, 2, 17),
					"r2": purchase("bob", 1, 3, 16),
					"r3": purchase("alice", 5, 4, 11),
					"r4": purchase("alice", 2, 5, 9),
				},
				Holds: map[string]domain.Hold{},
			},
		},
		{
			name: "mixed lifecycle",
			events: newLedger().stocked(2).deduct("alice", "r1", 2).adjust(3).deduct("bob", "r2", 1).
				release("alice", "r1", 2).adjust(-3).deduct("alice", "r3", 1).events,
			want: domain.SKUState{
				SKU: testSKU, Stock: 0, Seq: 7, Sold: 2, Supplied: 2,
				Buyers: map[string]int64{"alice": 1, "bob": 1},
				Requests: map[string]domain.Purchase{
					"r1": released(purchase("alice", 2, 2, 0), 5),
					"r2": purchase("bob", 1, 4, 2),
					"r3": purchase("alice", 1, 7, 0),
				},
				Holds: map[string]domain.Hold{},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.Fold(testSKU, tt.events)
			if err != nil {
				t.Fatalf("Fold error = %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Fold state mismatch\n got: %+v\nwant: %+v", *got, tt.want)
			}

			// Apply one by one gives the same result as Fold.
			s := domain.NewSKUState(testSKU)
			for _, e := range tt.events {
				if err := s.Apply(e); err != nil {
					t.Fatalf("Apply(seq %d) error = %v", e.Seq, err)
				}
			}
			if !reflect.DeepEqual(s, got) {
				t.Errorf("Apply-by-one state differs from Fold\n got: %+v\nwant: %+v", *s, *got)
			}
		})
	}
}

func TestFoldCorrupt(t *testing.T) {
	base := func() *ledger { return newLedger().stocked(10).deduct("alice", "r1", 2) }
	tests := []struct {
		name    string
		events  []domain.Event
		wantSeq int64  // seq named in the error
		msg     string // substring of the error message
	}{
		{
			name:    "seq gap",
			events:  base().adjust(1).mutateLast(func(e *domain.Event) { e.Seq = 4 }).events,
			wantSeq: 4, msg: "expected seq 3",
		},
		{
			name:    "seq repeated",
			events:  base().adjust(1).mutateLast(func(e *domain.Event) { e.Seq = 2 }).events,
			wantSeq: 2, msg: "expected seq 3",
		},
		{
			name:    "seq starting at 2",
			events:  newLedger().stocked(10).mutateLast(func(e *domain.Event) { e.Seq = 2 }).events,
			wantSeq: 2, msg: "expected seq 1",
		},
		{
			name:    "seq starting at 0",
			events:  newLedger().stocked(10).mutateLast(func(e *domain.Event) { e.Seq = 0 }).events,
			wantSeq: 0, msg: "expected seq 1",
		},
		{
			name:    "duplicate stocked",
			events:  base().stocked(5).events,
			wantSeq: 3, msg: "stocked event must be exactly the first",
		},
		{
			name:    "first event not stocked (deducted)",
			events:  newLedger().adjust(10).mutateLast(func(e *domain.Event) { e.Type = domain.EventDeducted }).events,
			wantSeq: 1, msg: "stocked event must be exactly the first",
		},
		{
			name:    "first event not stocked (adjusted)",
			events:  newLedger().adjust(10).events,
			wantSeq: 1, msg: "stocked event must be exactly the first",
		},
		{
			name:    "wrong sku on first event",
			events:  newLedger().stocked(10).mutateLast(func(e *domain.Event) { e.SKU = "other" }).events,
			wantSeq: 1, msg: `belongs to sku "other"`,
		},
		{
			name:    "wrong sku later",
			events:  base().adjust(1).mutateLast(func(e *domain.Event) { e.SKU = "other" }).events,
			wantSeq: 3, msg: `belongs to sku "other"`,
		},
		{
			name:    "deduct delta != -qty",
			events:  base().deduct("bob", "r2", 1).mutateLast(func(e *domain.Event) { e.Delta = -2; e.Balance = 6 }).events,
			wantSeq: 3, msg: "deduction delta -2 does not match qty 1",
		},
		{
			name:    "deduct positive delta",
			events:  base().deduct("bob", "r2", 1).mutateLast(func(e *domain.Event) { e.Delta = 1; e.Balance = 9 }).events,
			wantSeq: 3, msg: "does not match qty",
		},
		{
			name:    "deduct zero qty",
			events:  base().deduct("bob", "r2", 0).events,
			wantSeq: 3, msg: "does not match qty 0",
		},
		{
			name:    "deduct negative qty",
			events:  base().deduct("bob", "r2", -1).events,
			wantSeq: 3, msg: "does not match qty -1",
		},
		{
			name:    "release delta != qty",
			events:  base().release("alice", "r1", 1).events,
			wantSeq: 3, msg: `release by "alice" of 1 does not match purchase by "alice" of 2`,
		},
		{
			name:    "balance mismatch on deduct",
			events:  base().deduct("bob", "r2", 1).mutateLast(func(e *domain.Event) { e.Balance = 8 }).events,
			wantSeq: 3, msg: "balance 8 does not equal 8-1",
		},
		{
			name:    "balance mismatch on stocked",
			events:  newLedger().stocked(10).mutateLast(func(e *domain.Event) { e.Balance = 11 }).events,
			wantSeq: 1, msg: "balance 11 does not equal 0+10",
		},
		{
			name:    "balance mismatch on adjust",
			events:  base().adjust(3).mutateLast(func(e *domain.Event) { e.Balance = 10 }).events,
			wantSeq: 3, msg: "balance 10 does not equal 8+3",
		},
		{
			name:    "balance mismatch on release",
			events:  base().release("alice", "r1", 2).mutateLast(func(e *domain.Event) { e.Balance = 8 }).events,
			wantSeq: 3, msg: "balance 8 does not equal 8+2",
		},
		{
			name:    "negative balance from deduct",
			events:  base().deduct("bob", "r2", 9).events,
			wantSeq: 3, msg: "balance went negative",
		},
		{
			name:    "negative balance from adjust",
			events:  base().adjust(-9).events,
			wantSeq: 3, msg: "balance went negative",
		},
		{
			name:    "negative stocked",
			events:  newLedger().stocked(-1).events,
			wantSeq: 1, msg: "balance went negative",
		},
		{
			name:    "adjust overflow wraps negative",
			events:  base().adjust(1<<63 - 1).events,
			wantSeq: 3, msg: "", // any corrupt-ledger reason will do
		},
		{
			name:    "release of unknown request",
			events:  base().release("alice", "nope", 2).events,
			wantSeq: 3, msg: `release of unknown or already released request "nope"`,
		},
		{
			name:    "release before any deduction",
			events:  newLedger().stocked(1).release("alice", "r1", 1).events,
			wantSeq: 2, msg: "release of unknown",
		},
		{
			name:    "double release",
			events:  base().release("alice", "r1", 2).release("alice", "r1", 2).events,
			wantSeq: 4, msg: `already released request "r1"`,
		},
		{
			name:    "duplicate request id deduction",
			events:  base().deduct("alice", "r1", 2).events,
			wantSeq: 3, msg: `request id "r1" deducted twice`,
		},
		{
			name:    "duplicate request id by another user",
			events:  base().deduct("bob", "r1", 1).events,
			wantSeq: 3, msg: `request id "r1" deducted twice`,
		},
		{
			name:    "duplicate request id after release",
			events:  base().release("alice", "r1", 2).deduct("alice", "r1", 2).events,
			wantSeq: 4, msg: `request id "r1" deducted twice`,
		},
		{
			name:    "unknown event type",
			events:  base().adjust(1).mutateLast(func(e *domain.Event) { e.Type = "exploded" }).events,
			wantSeq: 3, msg: `unknown event type "exploded"`,
		},
		{
			name:    "empty event type",
			events:  base().adjust(1).mutateLast(func(e *domain.Event) { e.Type = "" }).events,
			wantSeq: 3, msg: `unknown event type ""`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := domain.Fold(testSKU, tt.events)
			if err == nil {
				t.Fatalf("Fold accepted corrupt ledger: %+v", *got)
			}
			if got != nil {
				t.Errorf("Fold returned state %+v along with error", *got)
			}
			if !errors.Is(err, domain.ErrCorruptLedger) {
				t.Fatalf("errors.Is(%v, ErrCorruptLedger) = false", err)
			}
			if errors.Is(err, domain.ErrInvalidInput) {
				t.Errorf("corrupt-ledger error also matches ErrInvalidInput: %v", err)
			}
			if want := fmt.Sprintf("seq %d:", tt.wantSeq); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

// A rejected Stock/Seq must not advance, so the caller can see where the
// ledger broke.
func TestApplyRejectKeepsStockAndSeq(t *testing.T) {
	l := newLedger().stocked(10).deduct("alice", "r1", 2)
	s, err := domain.Fold(testSKU, l.events)
	if err != nil {
		t.Fatal(err)
	}
	bad := l.adjust(-20).events[2]
	if err := s.Apply(bad); !errors.Is(err, domain.ErrCorruptLedger) {
		t.Fatalf("Apply(bad) = %v, want ErrCorruptLedger", err)
	}
	if s.Stock != 8 || s.Seq != 2 {
		t.Errorf("after rejected event: Stock=%d Seq=%d, want 8, 2", s.Stock, s.Seq)
	}
}

// TestApplyRejectedEventLeavesStateUnchanged documents that a rejected event
// must leave the whole state (Buyers and Requests included) untouched; see the
// report: Apply currently records a deduction/release before checking the
// balance, so this test is skipped until that is fixed.
func TestApplyRejectedEventLeavesStateUnchanged(t *testing.T) {
	cases := []struct {
		name string
		bad  func(l *ledger) domain.Event
	}{
		{"deduct with wrong balance", func(l *ledger) domain.Event {
			return l.deduct("bob", "r2", 1).mutateLast(func(e *domain.Event) { e.Balance = 0 }).events[2]
		}},
		{"deduct overdrawing stock", func(l *ledger) domain.Event {
			return l.deduct("bob", "r2", 50).events[2]
		}},
		{"release with wrong balance", func(l *ledger) domain.Event {
			return l.release("alice", "r1", 2).mutateLast(func(e *domain.Event) { e.Balance = 0 }).events[2]
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger().stocked(10).deduct("alice", "r1", 2)
			s, err := domain.Fold(testSKU, l.events)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := domain.Fold(testSKU, l.events)
			if err := s.Apply(tc.bad(l)); !errors.Is(err, domain.ErrCorruptLedger) {
				t.Fatalf("Apply(bad) = %v, want ErrCorruptLedger", err)
			}
			if !reflect.DeepEqual(s, before) {
				t.Fatalf("rejected event mutated state\n got: %+v\nwant: %+v", *s, *before)
			}
		})
	}
}

// TestFoldRejectsOutOfRangeQuantities: the fold bounds Qty and Delta by
// MaxQuantity, so a corrupt ledger cannot overflow a buyer's holding.
func TestFoldRejectsOutOfRangeQuantities(t *testing.T) {
	events := newLedger().stocked(math.MaxInt64).deduct("alice", "r1", math.MaxInt64).
		adjust(math.MaxInt64).deduct("alice", "r2", math.MaxInt64).events
	s, err := domain.Fold(testSKU, events)
	if err == nil {
		t.Fatalf("ledger with quantities above MaxQuantity accepted; Buyers = %v", s.Buyers)
	}
	if !errors.Is(err, domain.ErrCorruptLedger) {
		t.Fatalf("Fold error = %v, want ErrCorruptLedger", err)
	}
}

func TestFoldTakesAClosedEventOfNoUnits(t *testing.T) {
	stocked := domain.Event{SKU: "s", Seq: 1, Type: domain.EventStocked, Qty: 5, Delta: 5, Balance: 5}
	closed := domain.Event{SKU: "s", Seq: 2, Type: domain.EventClosed, Actor: "olga", Balance: 5}
	s, err := domain.Fold("s", []domain.Event{stocked, closed})
	if err != nil || s.Seq != 2 || s.Stock != 5 {
		t.Fatalf("fold with a closed event: %+v %v", s, err)
	}
	closed.Delta, closed.Balance = 1, 6
	if _, err := domain.Fold("s", []domain.Event{stocked, closed}); !errors.Is(err, domain.ErrCorruptLedger) {
		t.Fatalf("a closed event that moves stock: %v, want domain.ErrCorruptLedger", err)
	}
}
