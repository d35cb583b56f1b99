package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/observe/tracing"
	"github.com/invledger/invledger/projections/internal/redisbatch"
	"github.com/invledger/invledger/projections/streamentry"
)

// LedgerAppender is where the projection lands: an idempotent, order-free
// batch insert into the ledger that also moves the balances.
type LedgerAppender interface {
	AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error)
}

// GroupCommitConfig tunes the group-commit writer.
type GroupCommitConfig struct {
	// MaxEvents is the most events committed in one transaction, but for
	// an entry that alone holds more: an entry's events always commit
	// together. The projector reads this many entries at a time, so a read
	// of one-event entries fits one transaction; a read of batch entries
	// is split between entries.
	MaxEvents int
	// MaxWait is how long a batch may linger for more events after taking
	// every event already queued. Zero commits what is queued at once
	// (after ReadWait, for a read not yet complete).
	MaxWait time.Duration
	// ReadWait is how long a batch holding part of a read waits for the
	// read's other events: the router hands a read's messages to the
	// handlers one goroutine each, so they reach the writer over a few
	// milliseconds. Past it, the batch commits what it has. Default 50ms.
	ReadWait time.Duration
	// Writers is how many transactions may commit at once; two overlap one
	// batch's commit with the next one's gathering.
	Writers int
	// CommitTimeout bounds one transaction, so a hung PostgreSQL turns into
	// an error that the handlers retry with backoff.
	CommitTimeout time.Duration
}

func (c *GroupCommitConfig) setDefaults() {
	if c.MaxEvents == 0 {
		c.MaxEvents = 500
	}
	if c.ReadWait == 0 {
		c.ReadWait = 50 * time.Millisecond
	}
	if c.Writers == 0 {
		c.Writers = 2
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 10 * time.Second
	}
}

// Validate reports every invalid setting at once.
func (c GroupCommitConfig) Validate() error {
	var errs []error
	if c.MaxEvents < 1 {
		errs = append(errs, errors.New("group commit: MaxEvents must be at least 1"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("group commit: MaxWait must not be negative"))
	}
	if c.ReadWait < 0 {
		errs = append(errs, errors.New("group commit: ReadWait must not be negative"))
	}
	if c.Writers < 1 {
		errs = append(errs, errors.New("group commit: Writers must be at least 1"))
	}
	if c.CommitTimeout <= 0 {
		errs = append(errs, errors.New("group commit: CommitTimeout must be positive"))
	}
	return errors.Join(errs...)
}

// submission is the events of one stream entry. refused[i] is set, before
// done is sent, when the ledger refused event i on its own.
type submission struct {
	events  []domain.Event
	read    *redisbatch.Read
	refused []error
	done    chan error
}

// GroupCommitWriter gathers entries from many concurrent handlers and
// commits their events together. One goroutine gathers: it takes every
// queued entry, up to MaxEvents events, waits for the rest of every read
// the batch holds part of (up to ReadWait), lingers up to MaxWait, and
// hands the batch to one of Writers committers; while all of them are busy
// it keeps adding to the batch. submit returns only once its entry's
// transaction committed, so a handler acks its message strictly after the
// commit. An entry's events commit in one transaction; entries, even of
// one stream, may commit in any order, which the ledger's watermark (the
// highest seq with none missing below it) and the sealer allow for.
type GroupCommitWriter struct {
	cfg     GroupCommitConfig
	store   LedgerAppender
	metrics *Metrics

	// Handlers queue their events under mu and wake the gatherer only when
	// the queue was empty: a read's events reach it a few at a time, not
	// one goroutine switch each.
	mu     sync.Mutex
	queued []*submission
	wake   chan struct{} // holds a token once queued is no longer empty
}

// NewGroupCommitWriter returns a writer over store. Call Run to start it.
func NewGroupCommitWriter(cfg GroupCommitConfig, store LedgerAppender, metrics *Metrics) (*GroupCommitWriter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &GroupCommitWriter{cfg: cfg, store: store, metrics: metrics, wake: make(chan struct{}, 1)}, nil
}

// submit queues the events of one stream entry for the next batch, all in
// one transaction, and waits for its commit. read, if not nil, is the read
// that delivered the entry: the writer tries to commit all of a read's
// entries in one transaction. submit returns the commit's error, or ctx's
// when the caller gives up first; in that case the events may still
// commit, which is harmless because the insert is idempotent. When the
// ledger refused some of the events as data (ErrMalformedEntry, such as a
// second event for a seq) and committed the others, refused[i] says why
// it refused event i; refused is nil when it took them all.
func (w *GroupCommitWriter) submit(ctx context.Context, events []domain.Event, read *redisbatch.Read) (refused []error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &submission{events: events, read: read, done: make(chan error, 1)}
	w.mu.Lock()
	w.queued = append(w.queued, s)
	first := len(w.queued) == 1
	w.mu.Unlock()
	if first {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	select {
	case err := <-s.done:
		return s.refused, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// take moves queued submissions into g until it holds MaxEvents events (at
// least one submission, however many events it holds, into an empty g) and
// reports whether the queue is empty now.
func (w *GroupCommitWriter) take(g *gathering) (empty bool) {
	w.mu.Lock()
	k, events := 0, g.events
	for k < len(w.queued) && (events < w.cfg.MaxEvents || len(g.batch)+k == 0) {
		events += len(w.queued[k].events)
		k++
	}
	taken := w.queued[:k]
	w.queued = w.queued[k:]
	if len(w.queued) == 0 {
		// A fresh array, so the taken submissions are not kept alive by it.
		w.queued = nil
	}
	empty = len(w.queued) == 0
	w.mu.Unlock()
	for _, s := range taken {
		g.add(s)
	}
	return empty
}

// Run commits batches until ctx is done. A batch being gathered when ctx ends
// is still committed, and so is every event queued by then, so no submitter
// that queued before the end is left without an answer.
func (w *GroupCommitWriter) Run(ctx context.Context) {
	batches := make(chan []*submission)
	var wg sync.WaitGroup
	for range w.cfg.Writers {
		wg.Go(func() {
			for b := range batches {
				w.commit(b)
			}
		})
	}
	w.gather(ctx, batches)
	close(batches)
	wg.Wait()
}

// gather forms batches and sends each to a free committer, until ctx is
// done; it then sends the batch it holds and what is still queued, and
// returns.
func (w *GroupCommitWriter) gather(ctx context.Context, batches chan<- []*submission) {
	g := gathering{seen: map[*redisbatch.Read]int{}, open: map[*redisbatch.Read]struct{}{}}
	var started time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		empty := w.take(&g)
		if len(g.batch) == 0 {
			select {
			case <-w.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		if started.IsZero() {
			started = time.Now()
		}
		full := g.events >= w.cfg.MaxEvents
		wait := w.cfg.MaxWait
		if len(g.open) > 0 {
			wait = max(wait, w.cfg.ReadWait)
		}
		left := time.Until(started.Add(wait))
		var (
			wake   = w.wake
			out    chan<- []*submission
			expiry <-chan time.Time
		)
		if full || !empty {
			wake = nil
		}
		if full || left <= 0 {
			out = batches
		} else {
			timer.Reset(left)
			expiry = timer.C
		}
		select {
		case <-wake:
		case out <- g.batch:
			g.sent(!full)
			started = time.Time{}
		case <-expiry:
		case <-ctx.Done():
			for len(g.batch) > 0 {
				batches <- g.batch
				g.sent(true)
				w.take(&g)
			}
			return
		}
		timer.Stop()
	}
}

// gathering is the batch being formed, its events, and how much of each
// read it and the batches before it held. A read's Size counts entries, one
// submission each.
type gathering struct {
	batch  []*submission
	events int
	seen   map[*redisbatch.Read]int      // entries received of reads not yet complete
	open   map[*redisbatch.Read]struct{} // reads of this batch not yet complete
}

func (g *gathering) add(s *submission) {
	g.batch = append(g.batch, s)
	g.events += len(s.events)
	if s.read == nil {
		return
	}
	g.seen[s.read]++
	if g.seen[s.read] >= s.read.Size {
		delete(g.seen, s.read)
		delete(g.open, s.read)
		return
	}
	g.open[s.read] = struct{}{}
}

// sent starts a new batch. A read still incomplete when its wait ran out
// (some of its messages never reach the writer: malformed entries, and
// entries all of whose events are malformed, go to dead_letters instead) is forgotten, so the map cannot grow; a read cut by
// MaxEvents is remembered, its next events complete it.
func (g *gathering) sent(expired bool) {
	if expired {
		for r := range g.open {
			delete(g.seen, r)
		}
	}
	clear(g.open)
	g.batch = make([]*submission, 0, cap(g.batch))
	g.events = 0
}

// tracer names the projector's batch and commit spans.
var tracer = otel.Tracer("github.com/invledger/invledger/projections")

// commit runs detached from the router's context: a batch that started
// committing finishes, so shutdown never leaves a half-answered batch.
func (w *GroupCommitWriter) commit(batch []*submission) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CommitTimeout)
	defer cancel()
	var events []domain.Event
	var links []trace.Link
	for _, s := range batch {
		events = append(events, s.events...)
		for _, e := range s.events {
			// A sampled purchase's trace links to the batch that wrote it.
			if sc := tracing.SpanContextOf(e.TraceParent); sc.IsValid() {
				links = append(links, trace.Link{SpanContext: sc})
			}
		}
	}
	ctx, span := tracer.Start(ctx, "projector.batch", trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("invledger.batch.events", len(events))))
	defer span.End()
	start := time.Now()
	commitCtx, commitSpan := tracer.Start(ctx, "ledger.commit", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "postgresql")))
	inserted, err := w.store.AppendBatch(commitCtx, events)
	if err != nil {
		commitSpan.SetStatus(codes.Error, err.Error())
	}
	commitSpan.End()
	w.metrics.observeBatch(len(events), time.Since(start), inserted, err)
	if err == nil || !isDataError(err) {
		for _, s := range batch {
			s.done <- err
		}
		return
	}
	// One bad event must not hold back the others, not even its siblings
	// in an entry: commit them one by one and mark only the ones
	// PostgreSQL refuses as malformed.
	for _, s := range batch {
		s.done <- w.commitEach(ctx, s)
	}
}

// commitEach commits the events of s one at a time, recording in
// s.refused the ones the ledger refuses as data; any other error fails
// the whole entry, which is retried.
func (w *GroupCommitWriter) commitEach(ctx context.Context, s *submission) error {
	for i, e := range s.events {
		inserted, err := w.store.AppendBatch(ctx, []domain.Event{e})
		w.metrics.observeBatch(1, 0, inserted, err)
		switch {
		case err == nil:
		case isDataError(err):
			if s.refused == nil {
				s.refused = make([]error, len(s.events))
			}
			s.refused[i] = fmt.Errorf("%w: ledger refused it: %w", streamentry.ErrMalformedEntry, err)
		default:
			s.refused = nil
			return err
		}
	}
	return nil
}

// isDataError reports errors that retrying cannot fix: the row itself
// violates a ledger constraint, e.g. a second event for a (sku, seq).
func isDataError(err error) bool {
	return errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrInvalidInput)
}
