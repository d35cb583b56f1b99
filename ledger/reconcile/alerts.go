package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Alert is the JSON body POSTed to INVLEDGER_ALERT_WEBHOOK. Kind says which
// of the optional parts is set. The schema is documented in README.md;
// fields are only ever added.
type Alert struct {
	// Kind is "reconciliation_finding", "dead_letter" or "fenced_skus".
	Kind     string    `json:"kind"`
	Severity string    `json:"severity"`
	At       time.Time `json:"at"`
	// Finding is set for reconciliation_finding.
	Finding *Finding `json:"finding,omitempty"`
	// DeadLetter is set for dead_letter: a stream entry that was not projected.
	DeadLetter *DeadLetterAlert `json:"dead_letter,omitempty"`
	// Fenced is set for fenced_skus: SKUs still refusing purchases after a
	// verification pass.
	Fenced *FencedAlert `json:"fenced,omitempty"`
}

// DeadLetterAlert describes an entry stored in dead_letters.
type DeadLetterAlert struct {
	Stream   string `json:"stream"`
	StreamID string `json:"stream_id"`
	Reason   string `json:"reason"`
}

// FencedAlert counts SKUs left fenced after Redis restarted.
type FencedAlert struct {
	Count int `json:"count"`
}

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// WebhookURL receives a JSON POST per finding; empty disables the webhook.
	WebhookURL string
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// Attempts is how often a failed delivery is tried in all.
	Attempts int
	// QueueSize bounds alerts waiting for delivery; beyond it they are
	// dropped and counted, so a slow webhook never blocks the reconciler.
	QueueSize int
	Logger    *slog.Logger
	Metrics   *Metrics
	Client    *http.Client
}

func (c *NotifierConfig) setDefaults() {
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
		c.Client = &http.Client{}
	}
}

// Validate reports every invalid setting at once.
func (c NotifierConfig) Validate() error {
	var errs []error
	if c.Timeout <= 0 || c.Attempts < 1 || c.QueueSize < 1 {
		errs = append(errs, errors.New("alerts: Timeout, Attempts and QueueSize must be positive"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("alerts: Metrics is required"))
	}
	return errors.Join(errs...)
}

// Notifier raises an alert per finding: an slog ERROR with the SKU and the
// figures, and, if configured, a webhook POST delivered in the background.
type Notifier struct {
	cfg   NotifierConfig
	queue chan Alert
}

// NewNotifier returns a notifier; call Run to deliver webhooks.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{cfg: cfg, queue: make(chan Alert, cfg.QueueSize)}, nil
}

// Alert logs the finding and queues its webhook without waiting.
func (n *Notifier) Alert(ctx context.Context, f Finding) {
	n.cfg.Logger.ErrorContext(ctx, "reconciliation finding", "sku", f.SKU, "class", f.Class, "detail", f.Detail,
		"redis_stock", f.Before.RedisStock, "redis_seq", f.Before.RedisSeq, "ledger_stock", f.Before.LedgerStock,
		"ledger_seq", f.Before.LedgerSeq, "in_flight", f.Before.InFlight, "repaired", f.Repaired, "repair_error", f.RepairError)
	n.enqueue(Alert{Kind: "reconciliation_finding", Severity: severity(f), At: time.Now().UTC(), Finding: &f})
}

// DeadLetter alerts on a stream entry the projector stored in dead_letters.
func (n *Notifier) DeadLetter(ctx context.Context, stream, streamID, reason string) {
	n.cfg.Logger.ErrorContext(ctx, "stream entry sent to dead_letters", "stream", stream, "stream_id", streamID, "reason", reason)
	n.enqueue(Alert{Kind: "dead_letter", Severity: "critical", At: time.Now().UTC(),
		DeadLetter: &DeadLetterAlert{Stream: stream, StreamID: streamID, Reason: reason}})
}

// Fenced alerts that count SKUs still refuse purchases after verification.
func (n *Notifier) Fenced(ctx context.Context, count int) {
	n.cfg.Logger.ErrorContext(ctx, "skus still fenced after verification; purchases get recovering", "count", count)
	n.enqueue(Alert{Kind: "fenced_skus", Severity: "critical", At: time.Now().UTC(), Fenced: &FencedAlert{Count: count}})
}

func (n *Notifier) enqueue(a Alert) {
	if n.cfg.WebhookURL == "" {
		return
	}
	select {
	case n.queue <- a:
	default:
		n.cfg.Metrics.alerts.WithLabelValues("dropped").Inc()
		n.cfg.Logger.Warn("alert webhook queue full; alert dropped", "kind", a.Kind)
	}
}

func severity(f Finding) string {
	if f.Class == ClassRedisHigh || f.Class == ClassLedgerGap {
		return "critical"
	}
	return "warning"
}

// Run delivers queued alerts until ctx is done, then gives the ones already
// queued one attempt each.
func (n *Notifier) Run(ctx context.Context) {
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

func (n *Notifier) deliver(ctx context.Context, a Alert) {
	body, err := json.Marshal(a)
	if err != nil {
		n.cfg.Logger.Error("encode alert", "err", err)
		return
	}
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err = n.post(ctx, body)
		if err == nil {
			n.cfg.Metrics.alerts.WithLabelValues("delivered").Inc()
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
	n.cfg.Metrics.alerts.WithLabelValues("failed").Inc()
	n.cfg.Logger.Warn("alert webhook delivery failed", "kind", a.Kind, "err", err)
}

func (n *Notifier) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
