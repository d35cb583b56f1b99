package wire

// CreateSKUBody is PUT /v1/skus/{sku}. Stock is required; PerUserLimit
// absent is 1.
type CreateSKUBody struct {
	Stock        *int64 `json:"stock"`
	PerUserLimit *int64 `json:"per_user_limit"`
}

// DeductBody is POST /v1/skus/{sku}/deduct. An Idempotency-Key header
// stands for a missing RequestID.
type DeductBody struct {
	UserID    string `json:"user_id"`
	Qty       *int64 `json:"qty"`
	RequestID string `json:"request_id"`
}

// ReleaseBody is POST /v1/skus/{sku}/release: RequestID names the purchase.
type ReleaseBody struct {
	UserID    string `json:"user_id"`
	RequestID string `json:"request_id"`
	Reason    string `json:"reason,omitempty"`
}

// ReserveBody is POST /v1/skus/{sku}/holds; TTLSeconds absent is the
// server's default.
type ReserveBody struct {
	UserID     string `json:"user_id"`
	Qty        *int64 `json:"qty"`
	RequestID  string `json:"request_id"`
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
}

// PlaceOrderBody is POST /v1/orders; TTLSeconds absent is the server's
// default of holds.
type PlaceOrderBody struct {
	OrderID    string          `json:"order_id"`
	UserID     string          `json:"user_id"`
	TTLSeconds *int64          `json:"ttl_seconds,omitempty"`
	Lines      []OrderLineBody `json:"lines"`
}

// OrderLineBody is one line of PlaceOrderBody.
type OrderLineBody struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

// AdjustmentBody is POST /v1/adjustments.
type AdjustmentBody struct {
	SKU    string `json:"sku"`
	Delta  *int64 `json:"delta"`
	Reason string `json:"reason"`
}

// ReconcileBody is the optional body of POST /v1/reconcile: an empty SKU is
// every SKU.
type ReconcileBody struct {
	SKU    string `json:"sku,omitempty"`
	Repair bool   `json:"repair"`
}

// WebhookBody is POST /v1/webhooks.
type WebhookBody struct {
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
}

// ResolveBody is POST /v1/dead-letters/{id}/resolve.
type ResolveBody struct {
	Note string `json:"note"`
}
