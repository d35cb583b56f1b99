package domain

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// WebhookSoldOut is the business event a webhook gets when an event leaves
// a SKU's available stock at 0. It is derived from that event, never
// stored: the ledger's own types are EventType.
const WebhookSoldOut = "sold_out"

// WebhookEventTypes are the event types a business-event webhook can
// subscribe to: the ledger's event types that callers act on (the hold
// events among them), and the derived sold_out.
var WebhookEventTypes = []string{"deducted", "released", "reserved", "confirmed", "cancelled", "expired", "adjusted", WebhookSoldOut, "closed"}

// MaxWebhookURL bounds a webhook's URL.
const MaxWebhookURL = 2048

// WebhookSubscription is one business-event webhook: where its deliveries
// go, what it subscribed to, and the secrets that sign them. PreviousSecret
// still signs deliveries, beside Secret, until PreviousExpiresAt, so a
// rotation loses the receiver nothing.
type WebhookSubscription struct {
	ID                string
	URL               string
	EventTypes        []string
	Secret            string
	PreviousSecret    string
	PreviousExpiresAt time.Time
	CreatedBy         string
	CreatedAt         time.Time
}

// Wants reports whether the subscription gets messages of type t.
func (w WebhookSubscription) Wants(t string) bool { return slices.Contains(w.EventTypes, t) }

// ValidateWebhook checks a new subscription's URL (absolute http or https,
// at most MaxWebhookURL bytes, printable text as IsPrintable says, so that
// no control or bidirectional override reaches a log line or the console,
// and without user:password@, which listing the subscriptions would show
// every operator) and event types (at least one, each of
// WebhookEventTypes), and returns the types without repeats. Errors name
// the field: url or event_types. Whether the URL's address may be reached
// is the delivering adapter's to say.
func ValidateWebhook(rawURL string, types []string) ([]string, error) {
	var errs []error
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(rawURL) > MaxWebhookURL:
		errs = append(errs, NewFieldError("url", fmt.Errorf("must be an absolute http or https URL of at most %d bytes", MaxWebhookURL)))
	case !IsPrintableText(rawURL):
		errs = append(errs, NewFieldError("url", errors.New("must hold printable characters only (no controls, format characters or separators but the space); percent-encode the others")))
	case u.User != nil:
		errs = append(errs, NewFieldError("url", errors.New("must not carry user:password@; verify deliveries by their signature")))
	}
	var out []string
	for _, t := range types {
		if !slices.Contains(WebhookEventTypes, t) {
			errs = append(errs, NewFieldError("event_types", fmt.Errorf("unknown event type %q; known: %v", t, WebhookEventTypes)))
			break
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if len(types) == 0 {
		errs = append(errs, NewFieldError("event_types", errors.New("must name at least one event type")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// WebhookMessage is one delivery a ledger event makes: its type and its
// id, the webhook-id a receiver drops repeats by. The id is the same on
// every attempt and after every restart.
type WebhookMessage struct {
	ID   string
	Type string
}

// WebhookMessages lists what e announces, in delivery order: its own type,
// then sold_out when it took the last available units (a negative delta
// leaving the balance at 0). A stocked event announces nothing.
func WebhookMessages(e Event) []WebhookMessage {
	var out []WebhookMessage
	if t := string(e.Type); slices.Contains(WebhookEventTypes, t) {
		out = append(out, WebhookMessage{ID: "evt_" + e.ID, Type: t})
	}
	if e.Delta < 0 && e.Balance == 0 {
		out = append(out, WebhookMessage{ID: "evt_" + e.ID + "_sold_out", Type: WebhookSoldOut})
	}
	return out
}
