package projections_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/driven/redisbatch"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections"
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

// submitRead submits n events of read, each from its own goroutine started
// a little after the previous one, as the router hands a read's messages
// to the handlers, and waits for every commit.
func submitRead(t *testing.T, w *projections.GroupCommitWriter, read *redisbatch.Read, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := domain.Event{ID: fmt.Sprint(i), Type: domain.EventDeducted, SKU: "w", Seq: int64(i + 1)}
			if err := w.Submit(context.Background(), e, read); err != nil {
				t.Errorf("submit: %v", err)
			}
		})
		if i%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
}

func startWriter(t *testing.T, cfg projections.GroupCommitConfig, store projections.LedgerAppender) *projections.GroupCommitWriter {
	t.Helper()
	w, err := projections.NewGroupCommitWriter(cfg, store, projections.NewMetrics(prometheus.NewRegistry()))
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
	w := startWriter(t, projections.GroupCommitConfig{MaxBatch: 500, ReadWait: 5 * time.Second}, store)
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 400}, 400)
	if got := store.sizes(); len(got) != 1 || got[0] != 400 {
		t.Fatalf("batches %v, want one of 400", got)
	}
	// A read larger than MaxBatch fills whole transactions. The two
	// committers may reach the store in either order.
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 700}, 700)
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
	w := startWriter(t, projections.GroupCommitConfig{MaxBatch: 500, ReadWait: 100 * time.Millisecond}, store)
	start := time.Now()
	submitRead(t, w, &redisbatch.Read{Topic: "s", Source: redisbatch.SourceNew, Size: 10}, 9)
	if took := time.Since(start); took < 100*time.Millisecond || took > 3*time.Second {
		t.Fatalf("committed after %s, want ReadWait (100ms)", took)
	}
	if got := store.sizes(); len(got) != 1 || got[0] != 9 {
		t.Fatalf("batches %v, want one of 9", got)
	}
}
