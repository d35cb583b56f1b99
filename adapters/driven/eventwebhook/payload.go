package eventwebhook

import (
	"time"

	"github.com/invledger/invledger/domain"
)

// Payload is the body of a delivery, in the Standard Webhooks shape: the
// message type, when the event happened, and the event as the ledger holds
// it. A sold_out message carries the event that took the last units.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is a ledger event in a delivery. Balance is the available
// stock after it. HoldID and ExpiresAt are set on a hold's events, OrderID
// when the hold is a line of an order.
type EventData struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	SKU        string    `json:"sku"`
	Seq        int64     `json:"seq"`
	Qty        int64     `json:"qty"`
	Delta      int64     `json:"delta"`
	Balance    int64     `json:"balance"`
	UserID     string    `json:"user_id,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	HoldID     string    `json:"hold_id,omitempty"`
	OrderID    string    `json:"order_id,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
}

func newPayload(e domain.Event, m domain.WebhookMessage) Payload {
	return Payload{Type: m.Type, Timestamp: e.OccurredAt.UTC(), Data: EventData{
		EventID: e.ID, Type: string(e.Type), SKU: e.SKU, Seq: e.Seq, Qty: e.Qty, Delta: e.Delta, Balance: e.Balance,
		UserID: e.User, RequestID: e.RequestID, Actor: e.Actor, Reason: e.Reason, OccurredAt: e.OccurredAt.UTC(),
		HoldID: e.HoldID, OrderID: e.OrderID, ExpiresAt: e.ExpiresAt.UTC()}} // the zero time stays zero, and is left out
}

// EventPayload is e as the webhooks carry it, under its own type (never
// sold_out): the body other exports of the ledger's events, such as the
// broker export, publish, so every consumer reads one shape.
func EventPayload(e domain.Event) Payload {
	return newPayload(e, domain.WebhookMessage{Type: string(e.Type)})
}
