package wire

import "time"

// AdjustmentJSON is an adjustment as the API answers it and as the CLI
// prints it: the one JSON shape of a domain.Adjustment.
type AdjustmentJSON struct {
	ID                  int64      `json:"id"`
	SKU                 string     `json:"sku"`
	Delta               int64      `json:"delta"`
	Reason              string     `json:"reason"`
	RequestedBy         string     `json:"requested_by"`
	RequestedAt         time.Time  `json:"requested_at"`
	Status              string     `json:"status"`
	DecidedBy           *string    `json:"decided_by"`
	DecidedAt           *time.Time `json:"decided_at"`
	EventID             *string    `json:"event_id"`
	Seq                 *int64     `json:"seq"`
	Result              *string    `json:"result"`
	ReconciliationRunID *int64     `json:"reconciliation_run_id"`
}

// AdjustmentPageJSON is the body of GET /v1/adjustments and what `invledger
// adjust list --format json` reads.
type AdjustmentPageJSON struct {
	Adjustments []AdjustmentJSON `json:"adjustments"`
	NextAfter   *int64           `json:"next_after"`
}

// DeadLetterJSON is a dead letter as the API answers it and as `invledger
// dead-letters` prints it.
type DeadLetterJSON struct {
	ID        int64             `json:"id"`
	Stream    string            `json:"stream"`
	StreamID  string            `json:"stream_id"`
	Event     int               `json:"event"`
	Fields    map[string]string `json:"fields"`
	Error     string            `json:"error"`
	CreatedAt time.Time         `json:"created_at"`
	Status    string            `json:"status"`
	HandledBy *string           `json:"handled_by"`
	HandledAt *time.Time        `json:"handled_at"`
	Note      *string           `json:"note"`
}

// DeadLetterPageJSON is the body of GET /v1/dead-letters.
type DeadLetterPageJSON struct {
	DeadLetters []DeadLetterJSON `json:"dead_letters"`
	NextAfter   *int64           `json:"next_after"`
}

// WebhookJSON is a subscription as the API answers it. Secret is present
// only in the answers of create and rotate; PreviousSecretExpiresAt says
// until when the secret before a rotation still signs deliveries.
type WebhookJSON struct {
	ID                      string     `json:"id"`
	URL                     string     `json:"url"`
	EventTypes              []string   `json:"event_types"`
	CreatedBy               string     `json:"created_by"`
	CreatedAt               time.Time  `json:"created_at"`
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	Secret                  string     `json:"secret,omitempty"`
}

// WebhookListJSON is the body of GET /v1/webhooks.
type WebhookListJSON struct {
	Webhooks []WebhookJSON `json:"webhooks"`
}
