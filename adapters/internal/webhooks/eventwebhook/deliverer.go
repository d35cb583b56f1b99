// Package eventwebhook delivers the ledger's business events (deducted,
// released, adjusted, closed, the hold events, and the derived sold_out)
// to the webhooks operators subscribed, signed the Standard Webhooks way.
//
// Delivery reads the ledger in PostgreSQL, never the Redis streams: each
// subscription keeps a cursor per SKU (webhook_cursors) that moves only
// after the receiver answered 2xx, so a receiver that is down for any time
// gets everything afterwards, in seq order per SKU, and a restart or a
// kill -9 at worst sends the last few events again under the same
// webhook-id. Delivery is at least once: receivers drop repeats by
// webhook-id.
package eventwebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/webhooks/egress"
	"github.com/invledger/invledger/adapters/internal/webhooks/webhooksign"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Store is what delivery reads and records. *pgstore.PostgresWebhookStore
// implements it.
type Store interface {
	Webhooks(ctx context.Context) ([]domain.WebhookSubscription, error)
	// PendingSKUs lists the SKUs whose ledger goes past the subscription's cursor.
	PendingSKUs(ctx context.Context, id string) ([]ledger.WebhookCursor, error)
	// EventsAfter returns up to limit events of sku after seq, stopping at
	// the first gap; every event of a hold carries the hold's deadline.
	EventsAfter(ctx context.Context, sku string, seq int64, limit int) ([]domain.Event, error)
	// AdvanceCursor records that every event of sku up to seq was delivered.
	AdvanceCursor(ctx context.Context, id, sku string, seq int64) error
}

// Config configures a Deliverer.
type Config struct {
	Store Store
	// Client sends the deliveries. Default: an egress guard's client that
	// reaches no internal address and follows no redirect.
	Client *http.Client
	// Timeout bounds one attempt. Default 5 s.
	Timeout time.Duration
	// Poll is how often the ledger and the subscriptions are looked at
	// again once everything was delivered. Default 500 ms.
	Poll time.Duration
	// Workers is how many SKUs of one subscription are delivered at once;
	// each SKU's events go one after another. Default 4.
	Workers int
	// Batch is how many events of a SKU are read at once; the cursor is
	// recorded at least once per batch. Default 100.
	Batch int
	// MinBackoff is the wait after a failed attempt, doubled after each
	// further failure up to MaxBackoff. Defaults 100 ms and 30 s.
	MinBackoff, MaxBackoff time.Duration
	Metrics                *Metrics
	Logger                 *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Client == nil {
		c.Client = egress.New(nil).Client()
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = 500 * time.Millisecond
	}
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("event webhooks: Store is required"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("event webhooks: Metrics is required"))
	}
	if c.Timeout <= 0 || c.Poll <= 0 || c.Workers < 1 || c.Batch < 1 || c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		errs = append(errs, errors.New("event webhooks: Timeout, Poll, Workers, Batch and MinBackoff must be positive, MaxBackoff at least MinBackoff"))
	}
	return errors.Join(errs...)
}

// Deliverer delivers every subscription's events. One process of a
// deployment runs it (serve runs it under the webhook leader lock beside
// the projector); two would only send repeats.
type Deliverer struct {
	cfg Config
}

// New validates cfg and returns a Deliverer.
func New(cfg Config) (*Deliverer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Deliverer{cfg: cfg}, nil
}

// subscription is one running subscription: the latest row, refreshed
// every Poll so that a rotation signs with the new secret.
type subscription struct {
	mu     sync.Mutex
	row    domain.WebhookSubscription
	cancel context.CancelFunc
}

func (s *subscription) get() domain.WebhookSubscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.row
}

// Run delivers until ctx ends. Each subscription runs on its own, so a
// receiver that is down delays only itself. It returns nil when ctx ends.
func (d *Deliverer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	running := map[string]*subscription{}
	defer func() {
		for _, s := range running {
			s.cancel()
		}
		wg.Wait()
	}()
	t := time.NewTicker(d.cfg.Poll)
	defer t.Stop()
	for {
		subs, err := d.cfg.Store.Webhooks(ctx)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.WarnContext(ctx, "event webhooks: cannot list subscriptions", "err", err)
		}
		if err == nil {
			seen := map[string]bool{}
			for _, row := range subs {
				seen[row.ID] = true
				if s, ok := running[row.ID]; ok {
					s.mu.Lock()
					s.row = row
					s.mu.Unlock()
					continue
				}
				subCtx, cancel := context.WithCancel(ctx)
				s := &subscription{row: row, cancel: cancel}
				running[row.ID] = s
				wg.Go(func() { d.runSubscription(subCtx, s) })
			}
			for id, s := range running {
				if !seen[id] {
					s.cancel()
					delete(running, id)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// runSubscription delivers one subscription's pending SKUs, Workers at a
// time, then waits Poll and looks again, until ctx ends.
func (d *Deliverer) runSubscription(ctx context.Context, s *subscription) {
	for ctx.Err() == nil {
		pending, err := d.cfg.Store.PendingSKUs(ctx, s.get().ID)
		if err != nil && ctx.Err() == nil {
			d.cfg.Logger.WarnContext(ctx, "event webhooks: cannot read pending deliveries", "webhook", s.get().ID, "err", err)
		}
		sem := make(chan struct{}, d.cfg.Workers)
		var wg sync.WaitGroup
		for _, c := range pending {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				d.deliverSKU(ctx, s, c)
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
		case <-time.After(d.cfg.Poll):
		}
	}
}

// deliverSKU sends c.SKU's events after c.Seq in seq order until none is
// left or ctx ends, recording the cursor after each batch and before each
// wait for a retry.
func (d *Deliverer) deliverSKU(ctx context.Context, s *subscription, c ledger.WebhookCursor) {
	id := s.get().ID
	delivered := c.Seq
	record := func() {
		if delivered == c.Seq {
			return
		}
		// The cursor outlives ctx: what was delivered is recorded even at shutdown.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
		defer cancel()
		if err := d.cfg.Store.AdvanceCursor(rctx, id, c.SKU, delivered); err != nil {
			d.cfg.Logger.WarnContext(ctx, "event webhooks: cannot record the cursor; events will be sent again", "webhook", id, "sku", c.SKU, "err", err)
			return
		}
		c.Seq = delivered
	}
	defer record()
	for ctx.Err() == nil {
		events, err := d.cfg.Store.EventsAfter(ctx, c.SKU, delivered, d.cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.Logger.WarnContext(ctx, "event webhooks: cannot read the ledger", "sku", c.SKU, "err", err)
			}
			return
		}
		if len(events) == 0 {
			return
		}
		for _, e := range events {
			for _, m := range domain.WebhookMessages(e) {
				if s.get().Wants(m.Type) && !d.deliver(ctx, s, e, m, record) {
					return
				}
			}
			delivered = e.Seq
		}
		record()
	}
}

// deliver sends one message until the receiver answers 2xx, waiting
// between attempts; false when ctx ended first. Before its first wait it
// calls record, so the cursor holds everything delivered before.
func (d *Deliverer) deliver(ctx context.Context, s *subscription, e domain.Event, m domain.WebhookMessage, record func()) bool {
	body, _ := json.Marshal(newPayload(e, m)) // strings, numbers and times always encode
	backoff := d.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		err := d.post(ctx, s.get(), m.ID, body)
		if err == nil {
			d.cfg.Metrics.attempts.WithLabelValues("delivered").Inc()
			return true
		}
		d.cfg.Metrics.attempts.WithLabelValues("failed").Inc()
		if ctx.Err() != nil {
			return false
		}
		if attempt == 1 {
			record()
			if errors.Is(err, egress.ErrRefused) {
				// Retried like any failure, since the allow-list may change
				// with a restart; said once, as it is a setting to fix.
				d.cfg.Logger.WarnContext(ctx, "event webhooks: destination refused", "webhook", s.get().ID, "err", err)
			}
		}
		d.cfg.Logger.DebugContext(ctx, "event webhooks: delivery failed; retrying", "webhook", s.get().ID, "message", m.ID,
			"attempt", attempt, "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, d.cfg.MaxBackoff)
	}
}

func (d *Deliverer) post(ctx context.Context, sub domain.WebhookSubscription, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	now := time.Now()
	signers, err := signersOf(sub, now)
	if err != nil {
		return err
	}
	if err := webhooksign.SetHeaders(req.Header, id, now, body, signers...); err != nil {
		return err
	}
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close() // only the status counts
	// A redirect fails too: the client does not follow it.
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// signersOf returns the subscription's current secret, and the previous
// one while it is still valid.
func signersOf(sub domain.WebhookSubscription, now time.Time) ([]*standardwebhooks.Webhook, error) {
	secrets := []string{sub.Secret}
	if sub.PreviousSecret != "" && now.Before(sub.PreviousExpiresAt) {
		secrets = append(secrets, sub.PreviousSecret)
	}
	out := make([]*standardwebhooks.Webhook, 0, len(secrets))
	for _, secret := range secrets {
		w, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, fmt.Errorf("webhook %s: stored secret unusable: %w", sub.ID, err)
		}
		out = append(out, w)
	}
	return out, nil
}
