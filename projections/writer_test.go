package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/internal/redisbatch"
	"github.com/invledger/invledger/projections/streamentry"
)

// recordingStore records the size of every batch it is asked to append.
type recordingStore struct {
	mu      sync.Mutex
	batches []int
}

func (r *recordingStore) AppendBatch(_ context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, len(events))
	return map[domain.EventType]int{domain.EventDeducted: len(events)}, nil
}

func (r *recordingStore) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.batches...)
}

// submitRead submits n entries of read, of per events each, each entry
// from its own goroutine started a little after the previous one, as the
// router hands a read's messages to the handlers, and waits for every
// commit.
func submitRead(t *testing.T, w *GroupCommitWriter, read *redisbatch.Read, n, per int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			events := make([]domain.Event, per)
			for j := range events {
				seq := int64(i*per + j + 1)
				events[j] = domain.Event{ID: fmt.Sprint(seq), Type: domain.EventDeducted, SKU: "w", Seq: seq}
			}
			if refused, err := w.submit(context.Background(), events, read); err != nil || refused != nil {
				t.Errorf("submit: %v %v", refused, err)
			}
		})
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
}

func startWriter(t *testing.T, cfg GroupCommitConfig, store LedgerAppender) *GroupCommitWriter {
	t.Helper()
	w, err := NewGroupCommitWriter(cfg, store, NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// TestGroupCommitOneReadOneTransaction: the events of one read reach the
// writer over several milliseconds, from one goroutine each; they are
// committed in one transaction, not in whatever was queued when a writer
// happened to be free.
func TestGroupCommitOneReadOneTransaction(t *testing.T) {
	t.Parallel()
	store := &recordingStore{}
	w := startWriter(t, GroupCommitConfig{MaxEvents: 500, ReadWait: 5 * time.Second}, store)
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 400}, 400, 1)
	if got := store.sizes(); len(got) != 1 || got[0] != 400 {
		t.Fatalf("batches %v, want one of 400", got)
	}
	// A read larger than MaxEvents fills whole transactions. The two
	// committers may reach the store in either order.
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 700}, 700, 1)
	got := store.sizes()[1:]
	slices.Sort(got)
	if len(got) != 2 || got[0] != 200 || got[1] != 500 {
		t.Fatalf("batches %v, want one of 500 and one of 200", got)
	}
}

// TestGroupCommitIncompleteReadCommitsAfterReadWait: a read some of whose
// messages never reach the writer (they went to dead_letters) is committed
// once ReadWait ran out.
func TestGroupCommitIncompleteReadCommitsAfterReadWait(t *testing.T) {
	t.Parallel()
	store := &recordingStore{}
	w := startWriter(t, GroupCommitConfig{MaxEvents: 500, ReadWait: 100 * time.Millisecond}, store)
	start := time.Now()
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 10}, 9, 1)
	if took := time.Since(start); took < 100*time.Millisecond || took > 3*time.Second {
		t.Fatalf("committed after %s, want ReadWait (100ms)", took)
	}
	if got := store.sizes(); len(got) != 1 || got[0] != 9 {
		t.Fatalf("batches %v, want one of 9", got)
	}
}

// TestGroupCommitEntriesOfSeveralEvents: a read's Size counts entries, and
// an entry's events always commit in one transaction: a read of batch
// entries is one transaction when its events fit MaxEvents, and is split
// between entries when they do not.
func TestGroupCommitEntriesOfSeveralEvents(t *testing.T) {
	t.Parallel()
	store := &recordingStore{}
	w := startWriter(t, GroupCommitConfig{MaxEvents: 500, ReadWait: 5 * time.Second}, store)
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 100}, 100, 4)
	if got := store.sizes(); len(got) != 1 || got[0] != 400 {
		t.Fatalf("batches %v, want one of 400", got)
	}
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 70}, 70, 9)
	got := store.sizes()[1:]
	if len(got) != 2 || got[0]+got[1] != 630 || got[0]%9 != 0 || max(got[0], got[1]) > 504 {
		t.Fatalf("batches %v, want 630 events in two, split between entries", got)
	}
	// An entry larger than MaxEvents still commits whole.
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 1}, 1, 600)
	if got := store.sizes()[3:]; len(got) != 1 || got[0] != 600 {
		t.Fatalf("batches %v, want one of 600", got)
	}
}

// refusingStore refuses, as PostgreSQL refuses a second event for a seq,
// every batch holding an event of seq refuse.
type refusingStore struct {
	recordingStore
	refuse int64
}

func (r *refusingStore) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	for _, e := range events {
		if e.Seq == r.refuse {
			return nil, fmt.Errorf("%w: seq %d is taken", domain.ErrConflict, e.Seq)
		}
	}
	return r.recordingStore.AppendBatch(ctx, events)
}

// TestGroupCommitRefusesOneEventOfAnEntry: an event the ledger refuses is
// reported for itself, and its siblings in the entry commit.
func TestGroupCommitRefusesOneEventOfAnEntry(t *testing.T) {
	t.Parallel()
	store := &refusingStore{refuse: 2}
	w := startWriter(t, GroupCommitConfig{MaxEvents: 500}, store)
	events := []domain.Event{{ID: "1", Seq: 1}, {ID: "2", Seq: 2}, {ID: "3", Seq: 3}}
	refused, err := w.submit(context.Background(), events, nil)
	if err != nil || len(refused) != 3 || refused[0] != nil || refused[2] != nil ||
		!errors.Is(refused[1], streamentry.ErrMalformedEntry) || !errors.Is(refused[1], domain.ErrConflict) {
		t.Fatalf("refused %v, err %v; want event 1 alone refused", refused, err)
	}
	if got := store.sizes(); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("batches %v, want events 0 and 2 one by one", got)
	}
}
