package brokerexport

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/domain"
)

// Cursor is where the export to one broker stands on one SKU.
type Cursor struct {
	SKU string
	// Seq: the broker confirmed every event of SKU up to Seq.
	Seq int64
	// LastSeq is the ledger's last seq of SKU.
	LastSeq int64
	// Next is when the event after Seq happened; zero while it is still
	// on its way to the ledger.
	Next time.Time
}

// Lag is how far the export to one broker is behind the ledger, as its
// cursors say: what any process can show, whichever one exports.
type Lag struct {
	Broker string
	// Events is how many ledger events the broker has not confirmed.
	Events int64
	// LastConfirmed is when the export last recorded a confirmation.
	LastConfirmed time.Time
}

// Store is what the export reads and records. *pgstore.PostgresExportStore
// implements it.
type Store interface {
	// Pending lists the SKUs whose ledger goes past broker's cursor.
	Pending(ctx context.Context, broker string) ([]Cursor, error)
	// EventsAfter returns up to limit events of sku after seq, stopping at
	// the first gap.
	EventsAfter(ctx context.Context, sku string, seq int64, limit int) ([]domain.Event, error)
	// AdvanceCursor records that broker confirmed every event of sku up to
	// seq; a cursor never moves back.
	AdvanceCursor(ctx context.Context, broker, sku string, seq int64) error
}

// Publisher publishes to one broker. Its errors name the setting to fix
// (a *SettingError) when one explains them.
type Publisher interface {
	// Broker names the broker in cursors, metrics and logs: "nats" or "amqp".
	Broker() string
	// Connect connects, if not connected, and checks (or creates) what it
	// publishes into: a stream, an exchange.
	Connect(ctx context.Context) error
	// Publish publishes msgs, the events of sku that follow after without
	// a gap, in order, each confirmed by the broker before the next is
	// sent. It returns the seq up to which the broker holds sku's events
	// in order: after an error, the part confirmed; and, for a publisher
	// that reads what its broker holds, possibly more than msgs reach.
	Publish(ctx context.Context, sku string, after int64, msgs []Message) (int64, error)
	// Replay publishes msgs again without the order check, under the
	// same de-duplication ids.
	Replay(ctx context.Context, msgs []Message) error
	// HeldBeyondLedger is the error for a broker that Publish found
	// holding sku's events up to seq, past the ledger's last: it holds
	// another ledger's messages (left from a database restored or
	// recreated), and the error names the setting that gives the export a
	// place of its own. Only a publisher whose Publish answers past what it
	// was given meets it.
	HeldBeyondLedger(sku string, seq int64) error
	// Close disconnects.
	Close() error
}

// Config configures an Exporter.
type Config struct {
	Store     Store
	Publisher Publisher
	// Workers is how many SKUs are published at once; each SKU's events go
	// one after another. Default 64.
	Workers int
	// Batch is how many events of a SKU are read at once; the cursor is
	// recorded once per batch. Default 256.
	Batch int
	// Poll is how often the ledger is looked at again once everything was
	// published. Default 100 ms.
	Poll time.Duration
	// Timeout bounds a cursor write. Default 5 s.
	Timeout time.Duration
	// MinBackoff is the wait after a failure, doubled after each further
	// one up to MaxBackoff. Defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	Metrics                *Metrics
	Logger                 *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 64
	}
	if c.Batch == 0 {
		c.Batch = 256
	}
	if c.Poll == 0 {
		c.Poll = 100 * time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("broker export: Store is required"))
	}
	if c.Publisher == nil {
		errs = append(errs, errors.New("broker export: Publisher is required"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("broker export: Metrics is required"))
	}
	if c.Workers < 1 || c.Batch < 1 || c.Poll <= 0 || c.Timeout <= 0 || c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		errs = append(errs, errors.New("broker export: Workers, Batch, Poll, Timeout and MinBackoff must be positive, MaxBackoff at least MinBackoff"))
	}
	return errors.Join(errs...)
}

// Exporter exports the ledger to one broker. One process of a deployment
// runs it (serve's export component, under the export's leader lock); two
// at once would be refused by JetStream's order check, and would send
// AMQP consumers repeats.
type Exporter struct {
	cfg    Config
	broker string

	mu     sync.Mutex
	status Status
}

// Status is the export's last outcome, for readiness and the console.
type Status struct {
	Broker string
	// Err is the last failure, nil once a publish or a connect succeeded after it.
	Err error
	// LagEvents and LagSeconds are the export's lag when last measured.
	LagEvents  int64
	LagSeconds float64
}

// New validates cfg and returns an Exporter.
func New(cfg Config) (*Exporter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Exporter{cfg: cfg, broker: cfg.Publisher.Broker()}
	e.status = Status{Broker: e.broker, Err: errors.New("not started")}
	return e, nil
}

// Status returns the export's last outcome.
func (e *Exporter) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// setErr records the last outcome, and returns the one before.
func (e *Exporter) setErr(err error) (prev error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	prev = e.status.Err
	if err == nil && prev == nil {
		return nil
	}
	e.status.Err = err
	up := 1.0
	if err != nil {
		up = 0
	}
	e.cfg.Metrics.up.WithLabelValues(e.broker).Set(up)
	return prev
}

// Run exports until ctx ends, and returns nil then: a broker that is down
// or refuses is reported and retried, never returned, since it must not
// stop the process's other components (the sales).
func (e *Exporter) Run(ctx context.Context) error {
	defer e.cfg.Publisher.Close()
	backoff := e.cfg.MinBackoff
	connected := false
	for ctx.Err() == nil {
		if !connected {
			// Connect checks the stream or exchange again after a failure:
			// one deleted meanwhile is reported, or created again.
			if err := e.cfg.Publisher.Connect(ctx); err != nil {
				if ctx.Err() == nil {
					e.fail(ctx, "cannot connect", err)
				}
				sleep(ctx, backoff)
				backoff = min(2*backoff, e.cfg.MaxBackoff)
				continue
			}
			// The outcome is cleared by a round without a failure, not
			// here: a broker that takes connections and refuses every
			// publish must not look up between the two.
			connected = true
		}
		worked, failed := e.round(ctx)
		switch {
		case failed:
			connected = false
			sleep(ctx, backoff)
			backoff = min(2*backoff, e.cfg.MaxBackoff)
		case !worked:
			backoff = e.cfg.MinBackoff
			sleep(ctx, e.cfg.Poll)
		default:
			backoff = e.cfg.MinBackoff
		}
	}
	return nil
}

func (e *Exporter) fail(ctx context.Context, what string, err error) {
	e.cfg.Metrics.failures.WithLabelValues(e.broker).Inc()
	prev := e.setErr(err)
	// A refusal is said at warn level when it changes, then at debug, so a
	// broker down for an hour does not flood the log.
	level := slog.LevelWarn
	if prev != nil && prev.Error() == err.Error() {
		level = slog.LevelDebug
	}
	e.cfg.Logger.Log(ctx, level, "broker export: "+what+"; the export waits, sales go on", "broker", e.broker, "err", err)
}

// round publishes every pending SKU, Workers at a time; worked reports
// that something was pending, failed that a publish or a read failed.
func (e *Exporter) round(ctx context.Context) (worked, failed bool) {
	pending, err := e.cfg.Store.Pending(ctx, e.broker)
	if err != nil {
		if ctx.Err() == nil {
			e.fail(ctx, "cannot read the ledger", err)
		}
		return false, true
	}
	e.measureLag(pending)
	var (
		wg     sync.WaitGroup
		sem    = make(chan struct{}, e.cfg.Workers)
		anyErr atomic.Bool
		moved  atomic.Bool
	)
	for _, c := range pending {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			progressed, err := e.exportSKU(ctx, c)
			if progressed {
				moved.Store(true)
			}
			if err != nil {
				anyErr.Store(true)
				if ctx.Err() == nil {
					e.fail(ctx, "publish failed", err)
				}
			}
		})
	}
	wg.Wait()
	if !anyErr.Load() {
		e.setErr(nil)
	}
	return moved.Load(), anyErr.Load()
}

// roundBatches bounds the batches of one SKU in a round, so a SKU that
// sells without pause does not keep the SKUs appearing after it waiting.
const roundBatches = 8

// exportSKU publishes c.SKU's events after c.Seq in seq order, recording
// the cursor after each batch.
func (e *Exporter) exportSKU(ctx context.Context, c Cursor) (progressed bool, _ error) {
	cursor := c.Seq
	for range roundBatches {
		if ctx.Err() != nil {
			return progressed, nil
		}
		events, err := e.cfg.Store.EventsAfter(ctx, c.SKU, cursor, e.cfg.Batch)
		if err != nil || len(events) == 0 {
			return progressed, err
		}
		msgs := make([]Message, len(events))
		for i, ev := range events {
			msgs[i] = NewMessage(ev)
		}
		upTo, pubErr := e.cfg.Publisher.Publish(ctx, c.SKU, cursor, msgs)
		if last := events[len(events)-1].Seq; upTo > last {
			// The broker holds more of the SKU than was read: a previous
			// exporter published it, so the ledger must hold it too. A
			// stream left from another ledger (a database restored or
			// recreated) would otherwise make the export skip events.
			if err := e.checkHeld(ctx, c.SKU, upTo); err != nil {
				return progressed, err
			}
		}
		if upTo > cursor {
			now := time.Now()
			for _, ev := range events {
				if ev.Seq <= upTo && ev.Seq > cursor {
					e.cfg.Metrics.delay.WithLabelValues(e.broker).Observe(now.Sub(ev.OccurredAt).Seconds())
				}
			}
			e.cfg.Metrics.published.WithLabelValues(e.broker).Add(float64(min(upTo, events[len(events)-1].Seq) - cursor))
			// The cursor outlives ctx: what the broker confirmed is recorded even at shutdown.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Timeout)
			err := e.cfg.Store.AdvanceCursor(rctx, e.broker, c.SKU, upTo)
			cancel()
			if err != nil {
				return progressed, err
			}
			cursor, progressed = upTo, true
		}
		if pubErr != nil {
			return progressed, pubErr
		}
		if len(events) < e.cfg.Batch {
			return progressed, nil
		}
	}
	return progressed, nil
}

// checkHeld checks that the ledger holds sku's events up to seq, which
// the broker says it holds.
func (e *Exporter) checkHeld(ctx context.Context, sku string, seq int64) error {
	held, err := e.cfg.Store.EventsAfter(ctx, sku, seq-1, 1)
	if err != nil {
		return err
	}
	if len(held) == 0 {
		return e.cfg.Publisher.HeldBeyondLedger(sku, seq)
	}
	return nil
}

// measureLag sets the lag gauges from the pending cursors: the events the
// ledger holds past them, and the age of the oldest event not exported.
func (e *Exporter) measureLag(pending []Cursor) {
	var (
		events int64
		oldest time.Time
	)
	for _, c := range pending {
		events += c.LastSeq - c.Seq
		if !c.Next.IsZero() && (oldest.IsZero() || c.Next.Before(oldest)) {
			oldest = c.Next
		}
	}
	var secs float64
	if !oldest.IsZero() {
		secs = max(0, time.Since(oldest).Seconds())
	}
	e.cfg.Metrics.lagEvents.WithLabelValues(e.broker).Set(float64(events))
	e.cfg.Metrics.lagSeconds.WithLabelValues(e.broker).Set(secs)
	e.mu.Lock()
	e.status.LagEvents, e.status.LagSeconds = events, secs
	e.mu.Unlock()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
