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
)

// ParseEventType validates s as an event type.
func ParseEventType(s string) (EventType, error) {
	switch t := EventType(s); t {
	case EventStocked, EventDeducted, EventReleased, EventAdjusted, EventClosed:
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
	// StreamID is the event's id in its partition stream, once it has one.
	StreamID string
	// PrevHash and Hash link the event into its SKU's tamper-evident chain;
	// see EventHash.
	PrevHash string
	Hash     string
	// TraceParent is the W3C traceparent of the sampled request that
	// appended the event, when there was one: the stream carries it so the
	// ledger write links to the purchase's trace. The ledger does not keep it.
	TraceParent string
}
