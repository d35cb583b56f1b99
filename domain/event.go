package domain

import (
	"fmt"
	"time"
)

// EventType names what happened to a SKU's stock.
type EventType string

const (
	// EventStocked adds a SKU's initial stock. It is appended once in the SKU's life.
	EventStocked EventType = "stocked"
	// EventDeducted records a purchase: Delta is -Qty.
	EventDeducted EventType = "deducted"
	// EventReleased returns a purchase's units to stock: Delta is +Qty.
	EventReleased EventType = "released"
	// EventAdjusted records an approved manual stock change: Delta is signed.
	EventAdjusted EventType = "adjusted"
	// EventClosed records the end of a SKU's sale: Delta and Qty are 0,
	// Actor is who closed it. It is appended once, by the first close.
	EventClosed EventType = "closed"
	// EventReserved takes a hold's units out of available stock: Delta is
	// -Qty, and HoldID, ExpiresAt, User and RequestID are set.
	EventReserved EventType = "reserved"
	// EventConfirmed makes a hold a sale: Delta is 0.
	EventConfirmed EventType = "confirmed"
	// EventCancelled returns a hold's units at the buyer's request: Delta is +Qty.
	EventCancelled EventType = "cancelled"
	// EventExpired returns a hold's units once its deadline passed: Delta is +Qty.
	EventExpired EventType = "expired"
)

// HoldEvent reports whether t is one of a hold's events.
func (t EventType) HoldEvent() bool {
	switch t {
	case EventReserved, EventConfirmed, EventCancelled, EventExpired:
		return true
	}
	return false
}

// DeltaSign is the sign of the Delta that an event of type t carries
// relative to its Qty: -1 for what takes units out of available stock, +1
// for what gives them back, 0 for confirmed, which moves none. Stocked and
// adjusted events carry their own signed delta, reported as +1.
func (t EventType) DeltaSign() int64 {
	switch t {
	case EventDeducted, EventReserved:
		return -1
	case EventConfirmed:
		return 0
	}
	return 1
}

// ParseEventType validates s as an event type.
func ParseEventType(s string) (EventType, error) {
	switch t := EventType(s); t {
	case EventStocked, EventDeducted, EventReleased, EventAdjusted, EventClosed,
		EventReserved, EventConfirmed, EventCancelled, EventExpired:
		return t, nil
	}
	return "", NewFieldError("type", fmt.Errorf("unknown event type %q", s))
}

// Event is one change to a SKU's stock, as the purchase script appends it to
// the partition stream and as the ledger stores it. Seq is the per-SKU
// counter; Balance is the available stock after the change.
type Event struct {
	ID         string
	Type       EventType
	SKU        string
	Seq        int64
	Qty        int64
	Delta      int64
	Balance    int64
	User       string
	RequestID  string
	Actor      string
	Reason     string
	OccurredAt time.Time
	// HoldID, ExpiresAt and OrderID are set on a hold's events: the hold,
	// its deadline (from the Redis clock) and the order it belongs to, if
	// any, so the ledger alone tells what happened to a hold or an order.
	HoldID    string
	ExpiresAt time.Time
	OrderID   string
	// StreamID is the event's id in its partition stream, once it has one.
	StreamID string
	// TraceParent is the W3C traceparent of the sampled request that
	// appended the event, when there was one: the stream carries it so the
	// ledger write links to the purchase's trace. The ledger does not keep it.
	TraceParent string
}
