package wire

import "time"

// AuditEntryJSON is a ledger row as the audit API answers it and as
// `invledger audit --format json` prints it: the event, then when and from
// which stream entry it was recorded and its seal. Empty strings stand for
// NULL columns.
type AuditEntryJSON struct {
	EventJSON
	RecordedAt time.Time `json:"recorded_at"`
	StreamID   string    `json:"stream_id"`
	PrevHash   string    `json:"prev_hash"`
	Hash       string    `json:"hash"`
}

// HistoryPageJSON is the body of GET /v1/skus/{sku}/events and what
// `audit history --format json` prints.
type HistoryPageJSON struct {
	SKU       string           `json:"sku"`
	Events    []AuditEntryJSON `json:"events"`
	NextAfter *int64           `json:"next_after"`
}

// UserPageJSON is the body of GET /v1/users/{user_id}/purchases and what
// `audit user --format json` prints.
type UserPageJSON struct {
	UserID    string           `json:"user_id"`
	Events    []AuditEntryJSON `json:"events"`
	NextAfter *string          `json:"next_after"`
}

// HoldingJSON is one holder in BuyersJSON.
type HoldingJSON struct {
	UserID string `json:"user_id"`
	Qty    int64  `json:"qty"`
}

// BuyersJSON is the body of GET /v1/skus/{sku}/buyers and what
// `audit buyers --format json` prints.
type BuyersJSON struct {
	SKU       string        `json:"sku"`
	Buyers    []HoldingJSON `json:"buyers"`
	NextAfter *string       `json:"next_after"`
}

// StockAtJSON is the body of GET /v1/skus/{sku}/balance and what
// `audit balance-at --format json` prints.
type StockAtJSON struct {
	SKU   string    `json:"sku"`
	At    time.Time `json:"at"`
	Stock int64     `json:"stock"`
}

// OperationJSON is one entry of the operations audit trail.
type OperationJSON struct {
	ID     int64     `json:"id"`
	SKU    string    `json:"sku"`
	Action string    `json:"action"`
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
}

// OperationPageJSON is the body of GET /v1/skus/{sku}/operations and what
// `audit operations --format json` prints.
type OperationPageJSON struct {
	SKU        string          `json:"sku"`
	Operations []OperationJSON `json:"operations"`
	NextAfter  *int64          `json:"next_after"`
}
