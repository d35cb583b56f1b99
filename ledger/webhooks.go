package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// WebhookStore keeps business-event webhook subscriptions and their
// delivery cursors.
type WebhookStore interface {
	// CreateWebhook stores w with a cursor at the ledger's current end for
	// every SKU, so it gets the events after its creation.
	CreateWebhook(ctx context.Context, w domain.WebhookSubscription) error
	// Webhooks lists every subscription, oldest first.
	Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error)
	// DeleteWebhook removes a subscription and its cursors;
	// domain.ErrNotFound when there is none.
	DeleteWebhook(ctx context.Context, id string) error
	// RotateWebhookSecret makes secret the subscription's secret, keeping
	// the old one as the previous secret until previousExpiresAt;
	// domain.ErrNotFound when there is none.
	RotateWebhookSecret(ctx context.Context, id, secret string, previousExpiresAt time.Time) (domain.WebhookSubscription, error)
}

// WebhookCursor is where a subscription stands on one SKU: every ledger
// event up to Seq was delivered to it (or was of a type it does not get).
type WebhookCursor struct {
	SKU string
	Seq int64
}

// WebhooksConfig configures Webhooks.
type WebhooksConfig struct {
	Store WebhookStore
	// RotationOverlap is how long a rotated-out secret keeps signing
	// deliveries beside the new one. Default 24 h.
	RotationOverlap time.Duration
	// CheckURL, if set, refuses a URL whose destination deliveries may
	// not reach (an internal address), so the operator learns it when
	// subscribing rather than from deliveries that never arrive.
	CheckURL func(rawURL string) error
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c *WebhooksConfig) setDefaults() {
	if c.RotationOverlap == 0 {
		c.RotationOverlap = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every invalid setting at once.
func (c WebhooksConfig) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("webhooks: Store is required"))
	}
	if c.RotationOverlap < 0 {
		errs = append(errs, errors.New("webhooks: RotationOverlap must not be negative"))
	}
	return errors.Join(errs...)
}

// Webhooks manages the business-event webhook subscriptions: what an
// operator creates, lists, deletes and rotates. Delivery is the
// eventwebhook package's.
type Webhooks struct {
	cfg WebhooksConfig
}

// NewWebhooks validates cfg and returns the service.
func NewWebhooks(cfg WebhooksConfig) (*Webhooks, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Webhooks{cfg: cfg}, nil
}

// Create subscribes url to types on behalf of the context's actor and
// returns the subscription with its secret, which is shown only here and
// by Rotate. Invalid input is a FieldError naming url or event_types.
func (w *Webhooks) Create(ctx context.Context, url string, types []string) (domain.WebhookSubscription, error) {
	types, err := domain.ValidateWebhook(url, types)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	if w.cfg.CheckURL != nil {
		if err := w.cfg.CheckURL(url); err != nil {
			return domain.WebhookSubscription{}, domain.NewFieldError("url", err)
		}
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	sub := domain.WebhookSubscription{ID: "wh_" + uuid.NewString(), URL: url, EventTypes: types, Secret: secret,
		CreatedBy: ActorFrom(ctx), CreatedAt: w.cfg.Now().UTC()}
	if err := w.cfg.Store.CreateWebhook(ctx, sub); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("create webhook: %w", err)
	}
	return sub, nil
}

// List returns every subscription.
func (w *Webhooks) List(ctx context.Context) ([]domain.WebhookSubscription, error) {
	subs, err := w.cfg.Store.Webhooks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return subs, nil
}

// Delete ends a subscription: nothing more is delivered to it.
func (w *Webhooks) Delete(ctx context.Context, id string) error {
	if err := w.cfg.Store.DeleteWebhook(ctx, id); err != nil {
		return fmt.Errorf("delete webhook %s: %w", id, err)
	}
	return nil
}

// Rotate gives a subscription a new secret and returns it. The old secret
// keeps signing deliveries, beside the new one, for RotationOverlap.
func (w *Webhooks) Rotate(ctx context.Context, id string) (domain.WebhookSubscription, error) {
	secret, err := newWebhookSecret()
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	sub, err := w.cfg.Store.RotateWebhookSecret(ctx, id, secret, w.cfg.Now().Add(w.cfg.RotationOverlap).UTC())
	if err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("rotate webhook %s: %w", id, err)
	}
	return sub, nil
}

// newWebhookSecret makes a Standard Webhooks secret: whsec_ and 32 random
// bytes in base64.
func newWebhookSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}
