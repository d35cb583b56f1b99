package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/invledger/invledger/adapters/redisinventory"
	"github.com/invledger/invledger/domain"
)

// LedgerAppender is where the projection lands: an idempotent, order-free
// batch insert into the ledger that also moves the balances.
type LedgerAppender interface {
	AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error)
}

// GroupCommitConfig tunes the group-commit writer.
type GroupCommitConfig struct {
	// MaxBatch is the most events committed in one transaction.
	MaxBatch int
	// MaxWait is how long a batch may linger for more events after taking
	// every event already queued. Zero commits what is queued at once: each
	// consumer holds only one message until its commit, so lingering mostly
	// waits for events that cannot come.
	MaxWait time.Duration
	// Writers is how many transactions may commit at once; two overlap one
	// batch's commit with the next one's gathering.
	Writers int
	// CommitTimeout bounds one transaction, so a hung PostgreSQL turns into
	// an error that the handlers retry with backoff.
	CommitTimeout time.Duration
}

func (c *GroupCommitConfig) setDefaults() {
	if c.MaxBatch == 0 {
		c.MaxBatch = 500
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
	if c.MaxBatch < 1 {
		errs = append(errs, errors.New("group commit: MaxBatch must be at least 1"))
	}
	if c.MaxWait < 0 {
		errs = append(errs, errors.New("group commit: MaxWait must not be negative"))
	}
	if c.Writers < 1 {
		errs = append(errs, errors.New("group commit: Writers must be at least 1"))
	}
	if c.CommitTimeout <= 0 {
		errs = append(errs, errors.New("group commit: CommitTimeout must be positive"))
	}
	return errors.Join(errs...)
}

type submission struct {
	event domain.Event
	done  chan error
}

// GroupCommitWriter gathers events from many concurrent handlers and commits
// them together: each free writer takes every queued event, up to MaxBatch,
// lingers up to MaxWait for more, and commits them in one transaction.
// Submit returns only once its event's transaction committed, so a handler
// acks its message strictly after the commit.
type GroupCommitWriter struct {
	cfg     GroupCommitConfig
	store   LedgerAppender
	metrics *Metrics
	in      chan submission
}

// NewGroupCommitWriter returns a writer over store. Call Run to start it.
func NewGroupCommitWriter(cfg GroupCommitConfig, store LedgerAppender, metrics *Metrics) (*GroupCommitWriter, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &GroupCommitWriter{cfg: cfg, store: store, metrics: metrics, in: make(chan submission)}, nil
}

// Submit queues e for the next batch and waits for its commit. It returns the
// commit's error, or ctx's when the caller gives up first; in that case the
// event may still commit, which is harmless because the insert is idempotent.
func (w *GroupCommitWriter) Submit(ctx context.Context, e domain.Event) error {
	s := submission{event: e, done: make(chan error, 1)}
	select {
	case w.in <- s:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run commits batches until ctx is done. A batch being gathered when ctx ends
// is still committed, so no submitter is left without an answer.
func (w *GroupCommitWriter) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.cfg.Writers {
		wg.Go(func() { w.loop(ctx) })
	}
	wg.Wait()
}

func (w *GroupCommitWriter) loop(ctx context.Context) {
	batch := make([]submission, 0, w.cfg.MaxBatch)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		batch = batch[:0]
		select {
		case s := <-w.in:
			batch = append(batch, s)
		case <-ctx.Done():
			return
		}
		// Group commit: take everything queued while the last commit ran.
	drain:
		for len(batch) < w.cfg.MaxBatch {
			select {
			case s := <-w.in:
				batch = append(batch, s)
			default:
				break drain
			}
		}
		if w.cfg.MaxWait > 0 && len(batch) < w.cfg.MaxBatch {
			timer.Reset(w.cfg.MaxWait)
		linger:
			for len(batch) < w.cfg.MaxBatch {
				select {
				case s := <-w.in:
					batch = append(batch, s)
				case <-timer.C:
					break linger
				case <-ctx.Done():
					break linger
				}
			}
			timer.Stop()
		}
		w.commit(batch)
	}
}

// commit runs detached from the router's context: a batch that started
// committing finishes, so shutdown never leaves a half-answered batch.
func (w *GroupCommitWriter) commit(batch []submission) {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.CommitTimeout)
	defer cancel()
	events := make([]domain.Event, len(batch))
	for i, s := range batch {
		events[i] = s.event
	}
	start := time.Now()
	inserted, err := w.store.AppendBatch(ctx, events)
	w.metrics.observeBatch(len(batch), time.Since(start), inserted, err)
	if err == nil || !isDataError(err) {
		for _, s := range batch {
			s.done <- err
		}
		return
	}
	// One bad event must not hold back the others: commit them one by one
	// and mark only the ones PostgreSQL refuses as malformed.
	for _, s := range batch {
		inserted, err := w.store.AppendBatch(ctx, []domain.Event{s.event})
		w.metrics.observeBatch(1, 0, inserted, err)
		if err != nil && isDataError(err) {
			err = fmt.Errorf("%w: ledger refused it: %w", redisinventory.ErrMalformedEntry, err)
		}
		s.done <- err
	}
}

// isDataError reports errors that retrying cannot fix: the row itself
// violates a ledger constraint, e.g. a second event for a (sku, seq).
func isDataError(err error) bool {
	return errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrInvalidInput)
}
