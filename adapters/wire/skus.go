package wire

import "time"

// ErrorJSON is every error answer: Error is the code, Field the input at
// fault when there is one, TraceID the request's X-Request-Id.
type ErrorJSON struct {
	Error   string `json:"error"`
	Detail  string `json:"detail,omitempty"`
	Field   string `json:"field,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
}

// ReceiptJSON is the answer of POST /v1/skus/{sku}/deduct. A replayed
// purchase gets its original receipt, byte for byte; what changed since is
// said in the headers HeaderReplayed and HeaderReleased.
type ReceiptJSON struct {
	Status    string `json:"status"`
	Seq       int64  `json:"seq"`
	Remaining int64  `json:"remaining"`
	EventID   string `json:"event_id"`
}

// ReleaseReceiptJSON is the answer of POST /v1/skus/{sku}/release.
type ReleaseReceiptJSON struct {
	Status          string `json:"status"`
	EventID         string `json:"event_id"`
	Seq             int64  `json:"seq"`
	AlreadyReleased bool   `json:"already_released"`
}

// SKUJSON is a SKU definition as PUT /v1/skus/{sku} returns it.
type SKUJSON struct {
	SKU          string `json:"sku"`
	Stock        int64  `json:"stock"`
	PerUserLimit int64  `json:"per_user_limit"`
}

// WarmJSON is the answer of POST /v1/skus/{sku}/warm. Stocked is false when
// the SKU was already live and nothing changed.
type WarmJSON struct {
	SKU     string `json:"sku"`
	Stock   int64  `json:"stock"`
	Seq     int64  `json:"seq"`
	Status  string `json:"status"`
	Stocked bool   `json:"stocked"`
}

// SKUViewJSON is GET /v1/skus/{sku}: null where a side does not know yet
// (Redis before warm, the ledger before the first projection).
type SKUViewJSON struct {
	SKU         string `json:"sku"`
	RedisStock  *int64 `json:"redis_stock"`
	LedgerStock *int64 `json:"ledger_stock"`
	RedisSeq    *int64 `json:"redis_seq"`
	// LedgerSeq is the highest seq the ledger has seen, LedgerWatermark the
	// highest with no gap below it.
	LedgerSeq       *int64 `json:"ledger_seq"`
	LedgerWatermark *int64 `json:"ledger_watermark"`
	// RedisHeld and LedgerHeld are the units of open holds, out of the stock.
	RedisHeld    *int64 `json:"redis_held"`
	LedgerHeld   *int64 `json:"ledger_held"`
	State        string `json:"state"`
	InitialStock int64  `json:"initial_stock"`
	PerUserLimit int64  `json:"per_user_limit"`
}

// SKUItemJSON is one SKU of GET /v1/skus: GET /v1/skus/{sku} without the
// watermark, which would cost a scan per SKU.
type SKUItemJSON struct {
	SKU          string `json:"sku"`
	InitialStock int64  `json:"initial_stock"`
	PerUserLimit int64  `json:"per_user_limit"`
	State        string `json:"state"`
	RedisStock   *int64 `json:"redis_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	LedgerStock  *int64 `json:"ledger_stock"`
	LedgerSeq    *int64 `json:"ledger_seq"`
}

// SKUPageJSON is the body of GET /v1/skus and what `sku list --format
// json` prints.
type SKUPageJSON struct {
	SKUs      []SKUItemJSON `json:"skus"`
	NextAfter *string       `json:"next_after"`
}

// CloseJSON is the answer of POST /v1/skus/{sku}/close. AlreadyClosed is
// true when the SKU was closed before; ClosedAt is then the original time.
type CloseJSON struct {
	SKU           string    `json:"sku"`
	Status        string    `json:"status"`
	ClosedAt      time.Time `json:"closed_at"`
	AlreadyClosed bool      `json:"already_closed"`
}

// RetireJSON is the answer of POST /v1/skus/{sku}/retire. AlreadyRetired
// is true when the SKU was retired before; Seq and RetiredAt are then the
// original ones.
type RetireJSON struct {
	SKU            string    `json:"sku"`
	Status         string    `json:"status"`
	Seq            int64     `json:"seq"`
	RetiredAt      time.Time `json:"retired_at"`
	AlreadyRetired bool      `json:"already_retired"`
}
