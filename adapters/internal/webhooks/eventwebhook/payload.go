package eventwebhook

import (
	"time"

	"github.com/invledger/invledger/adapters/internal/eventjson"
	"github.com/invledger/invledger/adapters/wire"
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

// EventData is a ledger event in a delivery: the API's event JSON, and,
// for one release, the available stock after it under its 1.0.0 name too.
type EventData struct {
	wire.EventJSON
	// Balance is balance_after under the name 1.0.0's payload gave it; it is
	// kept for one release so that receivers can move, and then removed.
	Balance int64 `json:"balance"`
}

func newPayload(e domain.Event, m domain.WebhookMessage) Payload {
	data := eventjson.New(e)
	return Payload{Type: m.Type, Timestamp: e.OccurredAt.UTC(), Data: EventData{EventJSON: data, Balance: data.BalanceAfter}}
}
