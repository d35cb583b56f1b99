// Package eventjson maps the domain's events into wire.EventJSON, the one
// shape an event has outside: the tail feed and the business-event webhooks
// both take it from here, and the audit API builds the same fields from a
// ledger row.
package eventjson

import (
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// New is e in its JSON shape, field by field; occurred_at is in UTC.
func New(e domain.Event) wire.EventJSON {
	j := wire.EventJSON{EventID: e.ID, SKU: e.SKU, Seq: e.Seq, Type: string(e.Type), Delta: e.Delta, Qty: e.Qty,
		BalanceAfter: e.Balance, UserID: e.User, RequestID: e.RequestID, Actor: e.Actor, Reason: e.Reason,
		OccurredAt: e.OccurredAt.UTC(), HoldID: e.HoldID, OrderID: e.OrderID}
	if !e.ExpiresAt.IsZero() {
		at := e.ExpiresAt.UTC()
		j.ExpiresAt = &at
	}
	return j
}
