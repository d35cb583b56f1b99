package wire

import "time"

// HoldJSON is a hold as the hold routes answer it. Remaining, the stock
// left after the reserve, is given by the reserve only.
type HoldJSON struct {
	HoldID    string    `json:"hold_id"`
	SKU       string    `json:"sku"`
	UserID    string    `json:"user_id"`
	Qty       int64     `json:"qty"`
	Status    string    `json:"status"`
	ExpiresAt time.Time `json:"expires_at"`
	Seq       int64     `json:"seq"`
	Remaining *int64    `json:"remaining,omitempty"`
	OrderID   string    `json:"order_id,omitempty"`
}

// OrderLineJSON is one line of an order: its hold's id, and its state.
type OrderLineJSON struct {
	SKU    string `json:"sku"`
	Qty    int64  `json:"qty"`
	HoldID string `json:"hold_id"`
	// Status is the line's hold's state, or "none" for a line a placing
	// cut short never reserved.
	Status string `json:"status"`
}

// OrderJSON is an order as the order routes answer it.
type OrderJSON struct {
	OrderID   string          `json:"order_id"`
	UserID    string          `json:"user_id"`
	Status    string          `json:"status"`
	ExpiresAt time.Time       `json:"expires_at"`
	Lines     []OrderLineJSON `json:"lines"`
}
