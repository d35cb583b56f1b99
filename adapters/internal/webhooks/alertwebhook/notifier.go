package alertwebhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/webhooks/egress"
	"github.com/invledger/invledger/adapters/internal/webhooks/webhooksign"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Config configures a WebhookNotifier.
type Config struct {
	// URL receives a JSON POST per alert. Required.
	URL string
	// Secret, when set, signs every delivery the Standard Webhooks way
	// (webhook-id, webhook-timestamp, and webhook-signature: HMAC-SHA256
	// over "id.timestamp.body"), so the receiver can tell the alert came
	// from here. It is base64, optionally prefixed whsec_.
	Secret string
	// Timeout bounds one delivery attempt. Default 5 s.
	Timeout time.Duration
	// Attempts is how often a failed delivery is tried in all. Default 3.
	Attempts int
	// QueueSize bounds alerts waiting for delivery; beyond it they are
	// dropped and counted, so a slow webhook never blocks the caller.
	// Default 1000.
	QueueSize int
	// Metrics counts deliveries. Required.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Client defaults to an egress guard's client that reaches no internal
	// address and follows no redirect.
	Client *http.Client
}

func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.QueueSize == 0 {
		c.QueueSize = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Client == nil {
		c.Client = egress.New(nil).Client()
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("alert webhook: URL is required"))
	}
	if c.Timeout <= 0 || c.Attempts < 1 || c.QueueSize < 1 {
		errs = append(errs, errors.New("alert webhook: Timeout, Attempts and QueueSize must be positive"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("alert webhook: Metrics is required"))
	}
	if c.Secret != "" {
		if err := CheckSecret(c.Secret); err != nil {
			errs = append(errs, fmt.Errorf("alert webhook: Secret %w", err))
		}
	}
	return errors.Join(errs...)
}

// CheckSecret reports whether s can sign alerts: base64, optionally
// prefixed whsec_. Its error never shows s.
func CheckSecret(s string) error {
	if _, err := standardwebhooks.NewWebhook(s); err != nil || s == "" {
		return errors.New("must be base64, optionally prefixed whsec_ (the secret itself is not shown)")
	}
	return nil
}

// WebhookNotifier POSTs every alert it is given to the webhook, in the
// background: its methods only queue, never wait, and drop the alert when
// the queue is full. Run delivers the queue.
type WebhookNotifier struct {
	cfg   Config
	queue chan webhookAlert
	// signer signs deliveries; nil without Config.Secret.
	signer *standardwebhooks.Webhook
}

var _ reconcile.Notifier = (*WebhookNotifier)(nil)

// NewWebhookNotifier validates cfg and returns a notifier; call Run to
// deliver what it queues.
func NewWebhookNotifier(cfg Config) (*WebhookNotifier, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &WebhookNotifier{cfg: cfg, queue: make(chan webhookAlert, cfg.QueueSize)}
	if cfg.Secret != "" {
		n.signer, _ = standardwebhooks.NewWebhook(cfg.Secret) // checked by Validate
	}
	return n, nil
}

// Alert queues a reconciliation finding.
func (n *WebhookNotifier) Alert(_ context.Context, f reconcile.Finding) {
	n.enqueue(webhookAlert{Kind: kindFinding, Severity: severity(f), At: time.Now().UTC(), Finding: newWebhookFinding(f)})
}

// DeadLetter queues a stream entry the projector stored in dead_letters.
func (n *WebhookNotifier) DeadLetter(_ context.Context, stream, streamID, reason string) {
	n.enqueue(webhookAlert{Kind: kindDeadLetter, Severity: severityCritical, At: time.Now().UTC(),
		DeadLetter: &webhookDeadLetter{Stream: stream, StreamID: streamID, Reason: reason}})
}

// Fenced queues that count SKUs still refuse purchases after verification.
func (n *WebhookNotifier) Fenced(_ context.Context, count int) {
	n.enqueue(webhookAlert{Kind: kindFenced, Severity: severityCritical, At: time.Now().UTC(), Fenced: &webhookFenced{Count: count}})
}

// UnsafeRedis queues that sales stopped because Redis's settings are unsafe.
func (n *WebhookNotifier) UnsafeRedis(_ context.Context, reason string) {
	n.enqueue(webhookAlert{Kind: kindUnsafeRedis, Severity: severityCritical, At: time.Now().UTC(), UnsafeRedis: &webhookUnsafeRedis{Reason: reason}})
}

// SafeRedis queues that Redis's settings are safe again and sales resumed.
func (n *WebhookNotifier) SafeRedis(_ context.Context) {
	n.enqueue(webhookAlert{Kind: kindSafeRedis, Severity: severityWarning, At: time.Now().UTC()})
}

func (n *WebhookNotifier) enqueue(a webhookAlert) {
	select {
	case n.queue <- a:
	default:
		n.cfg.Metrics.deliveries.WithLabelValues("dropped").Inc()
		n.cfg.Logger.Warn("alert webhook queue full; alert dropped", "kind", a.Kind)
	}
}

// Run delivers queued alerts until ctx is done, then gives the ones already
// queued one attempt each.
func (n *WebhookNotifier) Run(ctx context.Context) {
	for {
		select {
		case a := <-n.queue:
			n.deliver(ctx, a)
		case <-ctx.Done():
			for {
				select {
				case a := <-n.queue:
					n.deliver(context.Background(), a)
				default:
					return
				}
			}
		}
	}
}

func (n *WebhookNotifier) deliver(ctx context.Context, a webhookAlert) {
	body, err := json.Marshal(a)
	if err != nil {
		n.cfg.Logger.Error("encode alert", "err", err)
		return
	}
	// One id for every attempt: the receiver drops repeats by it.
	id := "alert_" + uuid.NewString()
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err = n.post(ctx, id, body)
		if err == nil {
			n.cfg.Metrics.deliveries.WithLabelValues("delivered").Inc()
			return
		}
		if attempt >= n.cfg.Attempts || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(backoff):
			backoff *= 2
		case <-ctx.Done():
		}
	}
	n.cfg.Metrics.deliveries.WithLabelValues("failed").Inc()
	n.cfg.Logger.Warn("alert webhook delivery failed", "kind", a.Kind, "err", err)
}

func (n *WebhookNotifier) post(ctx context.Context, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alert webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if n.signer != nil {
		if err := webhooksign.SetHeaders(req.Header, id, time.Now(), body, n.signer); err != nil {
			return fmt.Errorf("alert webhook: %w", err)
		}
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("alert webhook: %w", err)
	}
	resp.Body.Close() // only the status counts; closing frees the connection
	// A redirect fails too: the client does not follow it.
	if resp.StatusCode >= 300 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
