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

// webhookAlert is the JSON body POSTed to INVLEDGER_ALERT_WEBHOOK. Kind
// says which of the optional parts is set. The schema is documented in
// README.md; fields are only ever added. It and the types below are the
// webhook's wire format, kept apart from Finding so that renaming a Go
// field never changes what receivers parse.
type webhookAlert struct {
	// Kind is "reconciliation_finding", "dead_letter" or "fenced_skus".
	Kind     string    `json:"kind"`
	Severity string    `json:"severity"`
	At       time.Time `json:"at"`
	// Finding is set for reconciliation_finding.
	Finding *webhookFinding `json:"finding,omitempty"`
	// DeadLetter is set for dead_letter: a stream entry that was not projected.
	DeadLetter *webhookDeadLetter `json:"dead_letter,omitempty"`
	// Fenced is set for fenced_skus: SKUs still refusing purchases after a
	// verification pass.
	Fenced *webhookFenced `json:"fenced,omitempty"`
}

// webhookDeadLetter describes an entry stored in dead_letters.
type webhookDeadLetter struct {
	Stream   string `json:"stream"`
	StreamID string `json:"stream_id"`
	Reason   string `json:"reason"`
}

// webhookFenced counts SKUs left fenced after Redis restarted.
type webhookFenced struct {
	Count int `json:"count"`
}

type webhookFinding struct {
	SKU         string               `json:"sku"`
	Class       string               `json:"class"`
	Detail      string               `json:"detail"`
	Before      webhookFigures       `json:"before"`
	After       *webhookFigures      `json:"after,omitempty"`
	MissingSeqs []webhookSeqRange    `json:"missing_seqs,omitempty"`
	Lost        []webhookLostReceipt `json:"lost,omitempty"`
	Repaired    bool                 `json:"repaired"`
	RepairError string               `json:"repair_error,omitempty"`
}

type webhookFigures struct {
	RedisStock   *int64 `json:"redis_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	RedisBuyers  *int64 `json:"redis_buyers,omitempty"`
	LedgerStock  int64  `json:"ledger_stock"`
	LedgerSeq    int64  `json:"ledger_seq"`
	LedgerCount  int64  `json:"ledger_count"`
	Holders      int64  `json:"ledger_holders"`
	InFlight     int    `json:"in_flight"`
	InFlightSum  int64  `json:"in_flight_delta"`
	TruthStock   int64  `json:"truth_stock"`
	TruthSeq     int64  `json:"truth_seq"`
	BalanceStock *int64 `json:"balance_stock,omitempty"`
	BalanceSeq   *int64 `json:"balance_seq,omitempty"`
}

type webhookSeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

type webhookLostReceipt struct {
	Seq       int64  `json:"seq"`
	EventID   string `json:"event_id"`
	RequestID string `json:"request_id"`
	User      string `json:"user_id"`
	Qty       int64  `json:"qty"`
}

func newWebhookFinding(f Finding) *webhookFinding {
	w := &webhookFinding{SKU: f.SKU, Class: string(f.Class), Detail: f.Detail, Before: webhookFigures(f.Before),
		Repaired: f.Repaired, RepairError: f.RepairError}
	if f.After != nil {
		after := webhookFigures(*f.After)
		w.After = &after
	}
	for _, r := range f.MissingSeqs {
		w.MissingSeqs = append(w.MissingSeqs, webhookSeqRange(r))
	}
	for _, l := range f.Lost {
		w.Lost = append(w.Lost, webhookLostReceipt(l))
	}
	return w
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
	queue chan webhookAlert
}

// NewNotifier returns a notifier; call Run to deliver webhooks.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{cfg: cfg, queue: make(chan webhookAlert, cfg.QueueSize)}, nil
}

// Alert logs the finding and queues its webhook without waiting.
func (n *Notifier) Alert(ctx context.Context, f Finding) {
	n.cfg.Logger.ErrorContext(ctx, "reconciliation finding", "sku", f.SKU, "class", f.Class, "detail", f.Detail,
		"redis_stock", f.Before.RedisStock, "redis_seq", f.Before.RedisSeq, "ledger_stock", f.Before.LedgerStock,
		"ledger_seq", f.Before.LedgerSeq, "in_flight", f.Before.InFlight, "repaired", f.Repaired, "repair_error", f.RepairError)
	n.enqueue(webhookAlert{Kind: "reconciliation_finding", Severity: severity(f), At: time.Now().UTC(), Finding: newWebhookFinding(f)})
}

// DeadLetter alerts on a stream entry the projector stored in dead_letters.
func (n *Notifier) DeadLetter(ctx context.Context, stream, streamID, reason string) {
	n.cfg.Logger.ErrorContext(ctx, "stream entry sent to dead_letters", "stream", stream, "stream_id", streamID, "reason", reason)
	n.enqueue(webhookAlert{Kind: "dead_letter", Severity: "critical", At: time.Now().UTC(),
		DeadLetter: &webhookDeadLetter{Stream: stream, StreamID: streamID, Reason: reason}})
}

// Fenced alerts that count SKUs still refuse purchases after verification.
func (n *Notifier) Fenced(ctx context.Context, count int) {
	n.cfg.Logger.ErrorContext(ctx, "skus still fenced after verification; purchases get recovering", "count", count)
	n.enqueue(webhookAlert{Kind: "fenced_skus", Severity: "critical", At: time.Now().UTC(), Fenced: &webhookFenced{Count: count}})
}

func (n *Notifier) enqueue(a webhookAlert) {
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

func (n *Notifier) deliver(ctx context.Context, a webhookAlert) {
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
