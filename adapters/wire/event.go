package wire

import "time"

// EventJSON is a ledger event as invledger shows it outside, in one shape
// everywhere: the API's audit rows (AuditEntryJSON adds where the row is and
// its seal), the tail feed (`invledger tail --format json`, the console's
// live feed) and the `data` of a business-event webhook. Empty strings stand
// for absent fields; the hold's fields are given on a hold's events only.
type EventJSON struct {
	EventID      string    `json:"event_id"`
	SKU          string    `json:"sku"`
	Seq          int64     `json:"seq"`
	Type         string    `json:"type"`
	Delta        int64     `json:"delta"`
	Qty          int64     `json:"qty"`
	BalanceAfter int64     `json:"balance_after"`
	UserID       string    `json:"user_id"`
	RequestID    string    `json:"request_id"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason"`
	OccurredAt   time.Time `json:"occurred_at"`
	// HoldID, OrderID and ExpiresAt are given on a hold's events only.
	HoldID    string     `json:"hold_id,omitempty"`
	OrderID   string     `json:"order_id,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}
