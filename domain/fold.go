package domain

import "fmt"

// Purchase is one deduction as the fold remembers it, so that a retry of its
// request id gets the original receipt and a release knows what to return.
type Purchase struct {
	User           string
	Qty            int64
	EventID        string
	Seq            int64
	Remaining      int64
	Released       bool
	ReleaseEventID string
	// ReleaseSeq is the seq of the released event, which a repeated release
	// reports; zero while the purchase is held.
	ReleaseSeq int64
}

// SKUState is the state that a SKU's events fold into: what Redis must hold
// for the SKU. It is built event by event with Apply, in seq order. Its
// units are conserved: Stock + Held + Sold = Supplied after every event.
type SKUState struct {
	SKU   string
	Stock int64
	Seq   int64
	// Held is the units of open holds; Sold the units deducted or
	// confirmed and not released; Supplied the stocked units plus the
	// approved adjustments.
	Held, Sold, Supplied int64
	// Buyers maps a user to the units counted against the per-user limit:
	// held and sold alike.
	Buyers map[string]int64
	// Requests maps a deduction's request id, or a confirmed hold's
	// reserve request id, to the purchase it made.
	Requests map[string]Purchase
	// Holds maps a hold id to the hold, open or ended.
	Holds map[string]Hold
}

// NewSKUState returns the empty state a SKU has before its stocked event.
func NewSKUState(sku string) *SKUState {
	return &SKUState{SKU: sku, Buyers: map[string]int64{}, Requests: map[string]Purchase{}, Holds: map[string]Hold{}}
}

// OpenHolds counts the holds not yet ended.
func (s *SKUState) OpenHolds() int {
	n := 0
	for _, h := range s.Holds {
		if h.Status == HoldHeld {
			n++
		}
	}
	return n
}

// Apply folds the next event into s. Events must arrive in seq order starting
// at 1, begin with the single stocked event, and agree with the balances they
// carry; anything else is ErrCorruptLedger naming the seq, because a state
// built over a broken ledger would be silently wrong.
func (s *SKUState) Apply(e Event) error {
	if e.SKU != s.SKU {
		return corrupt(e, "event belongs to sku %q", e.SKU)
	}
	if e.Seq != s.Seq+1 {
		return corrupt(e, "expected seq %d", s.Seq+1)
	}
	if (e.Type == EventStocked) != (s.Seq == 0) {
		return corrupt(e, "the stocked event must be exactly the first")
	}
	if e.Qty < -MaxQuantity || e.Qty > MaxQuantity || e.Delta < -MaxQuantity || e.Delta > MaxQuantity {
		return corrupt(e, "qty %d or delta %d exceeds %d", e.Qty, e.Delta, MaxQuantity)
	}
	var (
		release Purchase
		hold    Hold
	)
	held, sold, supplied := s.Held, s.Sold, s.Supplied
	switch e.Type {
	case EventStocked, EventAdjusted:
		// Delta is authoritative for stock changes made by operators.
		supplied += e.Delta
	case EventDeducted:
		if e.Qty <= 0 || e.Delta != -e.Qty {
			return corrupt(e, "deduction delta %d does not match qty %d", e.Delta, e.Qty)
		}
		if _, seen := s.Requests[e.RequestID]; seen {
			return corrupt(e, "request id %q deducted twice", e.RequestID)
		}
		if _, seen := s.Holds[holdIDFor(s.SKU, e.RequestID)]; seen {
			return corrupt(e, "request id %q deducted after it reserved a hold", e.RequestID)
		}
		sold += e.Qty
	case EventReserved:
		if e.Qty <= 0 || e.Delta != -e.Qty {
			return corrupt(e, "reserve delta %d does not match qty %d", e.Delta, e.Qty)
		}
		if e.HoldID != holdIDFor(s.SKU, e.RequestID) {
			return corrupt(e, "hold id %q is not the one of request id %q", e.HoldID, e.RequestID)
		}
		if _, seen := s.Holds[e.HoldID]; seen {
			return corrupt(e, "hold %s reserved twice", e.HoldID)
		}
		if _, seen := s.Requests[e.RequestID]; seen {
			return corrupt(e, "request id %q reserved after it deducted", e.RequestID)
		}
		hold = Hold{HoldID: e.HoldID, SKU: s.SKU, User: e.User, Qty: e.Qty, Status: HoldHeld, ExpiresAt: e.ExpiresAt,
			Seq: e.Seq, Remaining: e.Balance, RequestID: e.RequestID, OrderID: e.OrderID, EventID: e.ID}
		held += e.Qty
	case EventConfirmed, EventCancelled, EventExpired:
		h, ok := s.Holds[e.HoldID]
		if !ok || h.Status != HoldHeld {
			return corrupt(e, "%s of unknown or ended hold %q", e.Type, e.HoldID)
		}
		if e.Qty != h.Qty || e.Delta != e.Type.DeltaSign()*h.Qty {
			return corrupt(e, "%s of %d (delta %d) does not match hold of %d", e.Type, e.Qty, e.Delta, h.Qty)
		}
		h.Status, h.EndSeq, h.EndEventID = HoldStatus(e.Type), e.Seq, e.ID
		hold = h
		held -= h.Qty
		if e.Type == EventConfirmed {
			sold += h.Qty
		}
	case EventClosed:
		if e.Delta != 0 || e.Qty != 0 {
			return corrupt(e, "closed event with qty %d, delta %d", e.Qty, e.Delta)
		}
	case EventReleased:
		p, ok := s.Requests[e.RequestID]
		if !ok || p.Released {
			return corrupt(e, "release of unknown or already released request %q", e.RequestID)
		}
		if e.Delta != p.Qty || e.User != p.User {
			return corrupt(e, "release by %q of %d does not match purchase by %q of %d", e.User, e.Delta, p.User, p.Qty)
		}
		release = p
		sold -= p.Qty
	default:
		return corrupt(e, "unknown event type %q", e.Type)
	}
	if s.Stock+e.Delta != e.Balance {
		return corrupt(e, "balance %d does not equal %d%+d", e.Balance, s.Stock, e.Delta)
	}
	if e.Balance < 0 {
		return corrupt(e, "balance went negative")
	}
	if e.Balance+held+sold != supplied {
		return corrupt(e, "available %d + held %d + sold %d does not equal stocked and adjusted %d", e.Balance, held, sold, supplied)
	}
	// Every check passed; only now does the state change, so a refused event
	// leaves it as it was.
	switch e.Type {
	case EventDeducted:
		s.Buyers[e.User] += e.Qty
		s.Requests[e.RequestID] = Purchase{User: e.User, Qty: e.Qty, EventID: e.ID, Seq: e.Seq, Remaining: e.Balance}
	case EventReleased:
		release.Released, release.ReleaseEventID, release.ReleaseSeq = true, e.ID, e.Seq
		s.Requests[e.RequestID] = release
		s.freeAllowance(release.User, release.Qty)
	case EventReserved:
		s.Buyers[e.User] += e.Qty
		s.Holds[hold.HoldID] = hold
	case EventConfirmed:
		s.Holds[hold.HoldID] = hold
		s.Requests[hold.RequestID] = Purchase{User: hold.User, Qty: hold.Qty, EventID: hold.EventID, Seq: hold.Seq, Remaining: hold.Remaining}
	case EventCancelled, EventExpired:
		s.Holds[hold.HoldID] = hold
		s.freeAllowance(hold.User, hold.Qty)
	}
	s.Held, s.Sold, s.Supplied = held, sold, supplied
	s.Stock = e.Balance
	s.Seq = e.Seq
	return nil
}

// freeAllowance gives qty units of user's per-user limit back.
func (s *SKUState) freeAllowance(user string, qty int64) {
	if s.Buyers[user] -= qty; s.Buyers[user] <= 0 {
		delete(s.Buyers, user)
	}
}

// Fold applies events, in seq order, to a fresh state for sku.
func Fold(sku string, events []Event) (*SKUState, error) {
	s := NewSKUState(sku)
	for _, e := range events {
		if err := s.Apply(e); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func corrupt(e Event, format string, args ...any) error {
	return fmt.Errorf("%w: sku %s seq %d: %s", ErrCorruptLedger, e.SKU, e.Seq, fmt.Sprintf(format, args...))
}
