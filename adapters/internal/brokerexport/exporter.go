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

// Read asks for up to Limit events of SKU after seq After.
type Read struct {
	SKU   string
	After int64
	Limit int
}

// Store is what the export reads and records. *pgstore.PostgresExportStore
// implements it.
type Store interface {
	// Pending lists the SKUs whose ledger goes past broker's cursor.
	Pending(ctx context.Context, broker string) ([]Cursor, error)
	// EventsAfter returns up to limit events of sku after seq, stopping at
	// the first gap.
	EventsAfter(ctx context.Context, sku string, seq int64, limit int) ([]domain.Event, error)
	// EventsAfterEach answers several reads of distinct SKUs at once, as
	// EventsAfter each; out[i] answers reads[i].
	EventsAfterEach(ctx context.Context, reads []Read) ([][]domain.Event, error)
	// AdvanceCursors records, at once, that broker confirmed every event of
	// each SKU of to up to its seq; a cursor never moves back.
	AdvanceCursors(ctx context.Context, broker string, to map[string]int64) error
}

// Run is one SKU's part of a batch: the events that follow After, in
// order and without a gap.
type Run struct {
	SKU   string
	After int64
	Msgs  []Message
}

// Outcome is what a broker holds of one Run's SKU after a batch.
type Outcome struct {
	// UpTo: the broker holds the SKU's events in order up to UpTo, at
	// least the Run's After; after a failure, the part confirmed; for a
	// publisher that reads what its broker holds, possibly past the Run's
	// last message.
	UpTo int64
	// Err is why the rest of the Run was not confirmed.
	Err error
}

// ErrConflict marks an Outcome's Err when the broker holds what the
// export did not publish where a SKU's next event goes (another writer
// published to its subject): the SKU is left out of batches for
// Config.ConflictPause, with an alert, and the others go on.
var ErrConflict = errors.New("another writer published to the SKU's subject")

// Limits bound a batch.
type Limits struct {
	// Events is the most messages a batch holds; PerSKU the most of one SKU.
	Events, PerSKU int
}

// Publisher publishes to one broker. Its errors name the setting to fix
// (a *SettingError) when one explains them.
type Publisher interface {
	// Broker names the broker in cursors, metrics and logs: "nats" or "amqp".
	Broker() string
	// Connect connects, if not connected, and checks (or creates) what it
	// publishes into: a stream, an exchange. It also chooses the path
	// (Path) by what the broker supports.
	Connect(ctx context.Context) error
	// Path names how batches are published, once connected, for the log
	// and the metrics' path label: "atomic_batch", "per_sku", "window".
	Path() string
	// Limits bound the batches Publish takes, once connected.
	Limits() Limits
	// Publish publishes runs, of distinct SKUs, keeping each SKU's order:
	// no event of a Run is held by the broker unless every earlier one of
	// it is. It answers one Outcome per Run. The broker confirms what an
	// Outcome's UpTo covers before Publish returns.
	Publish(ctx context.Context, runs []Run) []Outcome
	// Replay publishes msgs again without the order check, under the
	// same de-duplication ids.
	Replay(ctx context.Context, msgs []Message) error
	// Down reports why the broker cannot take a publish now (its
	// connection is down or stalled), nil while it is connected. It is
	// cheap: readiness asks it on every probe.
	Down() error
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

// DefaultWorkers is Config.Workers' default: enough batches in flight to
// keep a broker busy while the next ones are read, few enough that a
// broker fault repeats little.
const DefaultWorkers = 4

// Config configures an Exporter.
type Config struct {
	Store     Store
	Publisher Publisher
	// Workers is how many batches, each of other SKUs, are published at
	// once. Default DefaultWorkers.
	Workers int
	// Poll is how often the ledger is looked at again once everything was
	// published. Default 100 ms.
	Poll time.Duration
	// Timeout bounds a cursor write. Default 5 s.
	Timeout time.Duration
	// MinBackoff is the wait after a failure, doubled after each further
	// one up to MaxBackoff. Defaults 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// ConflictPause is how long a SKU whose subject another writer
	// published to stays out of batches before it is tried again (an
	// operator may have cleaned the subject meanwhile). Default 1 min.
	ConflictPause time.Duration
	Metrics       *Metrics
	Logger        *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
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
	if c.ConflictPause == 0 {
		c.ConflictPause = time.Minute
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
	if c.Workers < 1 || c.Poll <= 0 || c.Timeout <= 0 || c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff || c.ConflictPause <= 0 {
		errs = append(errs, errors.New("broker export: Workers, Poll, Timeout, MinBackoff and ConflictPause must be positive, MaxBackoff at least MinBackoff"))
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
	// paused holds the SKUs left out of batches after a conflict, until
	// when.
	paused map[string]time.Time
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
	e := &Exporter{cfg: cfg, broker: cfg.Publisher.Broker(), paused: map[string]time.Time{}}
	e.status = Status{Broker: e.broker, Err: errors.New("not started")}
	return e, nil
}

// Status returns the export's last outcome; a broker whose connection is
// down is failing even while nothing waits to be published.
func (e *Exporter) Status() Status {
	e.mu.Lock()
	s := e.status
	e.mu.Unlock()
	if s.Err == nil {
		s.Err = e.cfg.Publisher.Down()
	}
	return s
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
			e.cfg.Metrics.setPath(e.broker, e.cfg.Publisher.Path())
		}
		worked, failed := e.round(ctx)
		switch {
		case failed:
			connected = false
			sleep(ctx, backoff)
			backoff = min(2*backoff, e.cfg.MaxBackoff)
		case !worked:
			backoff = e.cfg.MinBackoff
			// Nothing waits: the broker is not asked, so its connection is.
			if err := e.cfg.Publisher.Down(); err != nil && ctx.Err() == nil {
				e.fail(ctx, "the broker's connection is down", err)
				connected = false
			}
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

// round publishes every pending SKU's next events, in batches of
// distinct SKUs, Workers batches at once; worked reports that something
// was pending, failed that a publish or a read failed in a way that
// calls for a new connection.
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
		wg       sync.WaitGroup
		sem      = make(chan struct{}, e.cfg.Workers)
		anyErr   atomic.Bool
		conflict atomic.Bool
		moved    atomic.Bool
	)
	for _, reads := range e.plan(pending) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			progressed, conflicted, err := e.exportBatch(ctx, reads)
			if progressed {
				moved.Store(true)
			}
			if conflicted {
				conflict.Store(true)
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
	if !anyErr.Load() && !conflict.Load() && e.pausedCount() == 0 {
		e.setErr(nil)
	}
	return moved.Load(), anyErr.Load()
}

// plan splits the pending SKUs, leaving out those paused, into batches
// within the publisher's limits: a SKU's reads go into one batch per
// round, so a SKU that sells without pause does not keep the others
// waiting.
func (e *Exporter) plan(pending []Cursor) [][]Read {
	limits := e.cfg.Publisher.Limits()
	var (
		out   [][]Read
		batch []Read
		size  int
	)
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range pending {
		if until, ok := e.paused[c.SKU]; ok {
			if now.Before(until) {
				continue
			}
			delete(e.paused, c.SKU)
		}
		n := int(min(c.LastSeq-c.Seq, int64(limits.PerSKU)))
		if size+n > limits.Events && len(batch) > 0 {
			out, batch, size = append(out, batch), nil, 0
		}
		n = min(n, limits.Events)
		batch = append(batch, Read{SKU: c.SKU, After: c.Seq, Limit: n})
		size += n
	}
	if len(batch) > 0 {
		out = append(out, batch)
	}
	e.cfg.Metrics.paused.WithLabelValues(e.broker).Set(float64(len(e.paused)))
	return out
}

// roundBatches bounds the batches a worker publishes for the same SKUs
// in a round: the SKUs of a full batch (a hot SKU during a sale) go on
// without waiting for the next round's listing, and the SKUs listed
// after them still get their turn.
const roundBatches = 8

// exportBatch publishes reads as one batch, then, while some SKUs filled
// their part and were confirmed whole, the next events of those SKUs, up
// to roundBatches batches. The next events are read while a batch is
// being published, so a hot SKU's export waits on the broker and on
// PostgreSQL at once rather than in turn. conflicted reports a SKU paused
// after a conflict; err the batches' other failures.
func (e *Exporter) exportBatch(ctx context.Context, reads []Read) (progressed, conflicted bool, err error) {
	events, err := e.cfg.Store.EventsAfterEach(ctx, reads)
	if err != nil {
		return false, false, err
	}
	for range roundBatches {
		ahead := readAhead(reads, events, e.cfg.Publisher.Limits())
		var prefetch chan prefetched
		if len(ahead) > 0 {
			prefetch = make(chan prefetched, 1)
			go func() {
				ev, err := e.cfg.Store.EventsAfterEach(ctx, ahead)
				prefetch <- prefetched{ev, err}
			}()
		}
		moved, paused, whole, err := e.exportOnce(ctx, reads, events)
		progressed, conflicted = progressed || moved, conflicted || paused
		if prefetch == nil {
			return progressed, conflicted, err
		}
		got := <-prefetch
		if err != nil || ctx.Err() != nil || got.err != nil || !allWhole(ahead, whole) {
			// What was read ahead assumed every full part confirmed whole.
			return progressed, conflicted, err
		}
		reads, events = ahead, got.events
	}
	return progressed, conflicted, nil
}

type prefetched struct {
	events [][]domain.Event
	err    error
}

// readAhead are the reads that follow reads, answered by events, for the
// SKUs whose part was full: what the next batch holds if the broker
// confirms this one whole. They share a batch's room, however few events
// each SKU had when the round listed it (a hot SKU that the export keeps
// up with).
func readAhead(reads []Read, events [][]domain.Event, limits Limits) []Read {
	var out []Read
	for i, r := range reads {
		if n := len(events[i]); n > 0 && n == r.Limit {
			out = append(out, Read{SKU: r.SKU, After: events[i][n-1].Seq})
		}
	}
	for i := range out {
		out[i].Limit = max(1, min(limits.PerSKU, limits.Events/len(out)))
	}
	return out
}

// allWhole reports whether every SKU of reads was confirmed whole.
func allWhole(reads []Read, whole map[string]bool) bool {
	for _, r := range reads {
		if !whole[r.SKU] {
			return false
		}
	}
	return true
}

// exportOnce publishes events, read for reads, as one batch and records,
// in one write, the cursors the broker confirmed. whole holds the SKUs
// whose part the broker confirmed whole.
func (e *Exporter) exportOnce(ctx context.Context, reads []Read, events [][]domain.Event) (progressed, conflicted bool, whole map[string]bool, _ error) {
	runs := make([]Run, 0, len(reads))
	last := make([]int64, 0, len(reads)) // of each run, the last seq read
	whole = make(map[string]bool, len(reads))
	for i, r := range reads {
		if len(events[i]) == 0 {
			continue // its next event is still on its way to the ledger
		}
		msgs := make([]Message, len(events[i]))
		for j, ev := range events[i] {
			msgs[j] = NewMessage(ev)
		}
		runs = append(runs, Run{SKU: r.SKU, After: r.After, Msgs: msgs})
		last = append(last, events[i][len(events[i])-1].Seq)
	}
	if len(runs) == 0 {
		return false, false, nil, nil
	}
	outcomes := e.cfg.Publisher.Publish(ctx, runs)
	var (
		moves = map[string]int64{}
		errs  []error
		now   = time.Now()
	)
	for i, o := range outcomes {
		run := runs[i]
		if errors.Is(o.Err, ErrConflict) {
			e.pause(ctx, run.SKU, o.Err)
			conflicted = true
		} else if o.Err != nil {
			errs = append(errs, o.Err)
		}
		if o.UpTo <= run.After {
			continue
		}
		if o.UpTo > last[i] {
			// The broker holds more of the SKU than was read: a previous
			// exporter published it, so the ledger must hold it too. A
			// stream left from another ledger (a database restored or
			// recreated) would otherwise make the export skip events.
			if err := e.checkHeld(ctx, run.SKU, o.UpTo); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		for _, ev := range events[i] {
			if ev.Seq > run.After && ev.Seq <= o.UpTo {
				e.cfg.Metrics.delay.WithLabelValues(e.broker).Observe(now.Sub(ev.OccurredAt).Seconds())
			}
		}
		e.cfg.Metrics.published.WithLabelValues(e.broker).Add(float64(min(o.UpTo, last[i]) - run.After))
		moves[run.SKU] = o.UpTo
		if o.Err == nil && o.UpTo == last[i] {
			whole[run.SKU] = true
		}
	}
	if len(moves) > 0 {
		// The cursors outlive ctx: what the broker confirmed is recorded even at shutdown.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Timeout)
		err := e.cfg.Store.AdvanceCursors(rctx, e.broker, moves)
		cancel()
		if err != nil {
			return false, conflicted, nil, err
		}
	}
	return len(moves) > 0, conflicted, whole, errors.Join(errs...)
}

// pause leaves sku out of batches for ConflictPause, and says so at
// error level: the SKU's subject needs an operator.
func (e *Exporter) pause(ctx context.Context, sku string, err error) {
	e.mu.Lock()
	e.paused[sku] = time.Now().Add(e.cfg.ConflictPause)
	e.mu.Unlock()
	e.cfg.Metrics.failures.WithLabelValues(e.broker).Inc()
	e.setErr(err)
	e.cfg.Logger.ErrorContext(ctx, "broker export: a SKU's subject holds messages the export did not publish; the SKU is left out of the export, the others go on",
		"broker", e.broker, "sku", sku, "retry_in", e.cfg.ConflictPause, "err", err)
}

func (e *Exporter) pausedCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.paused)
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
