package redisinventory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/projections/streamentry"
)

// gatedRun stands in for Redis: each call blocks until the test lets it
// return, and the calls in flight are counted by partition.
type gatedRun struct {
	keys    Keyspace
	release chan struct{}

	mu       sync.Mutex
	inFlight map[int]int
	total    int
	calls    chan int // the partition of every call, as it starts
}

func (g *gatedRun) run(_ context.Context, keys []string, args []any) ([]any, error) {
	p := g.partitionOf(keys)
	g.mu.Lock()
	g.inFlight[p]++
	g.total++
	g.mu.Unlock()
	g.calls <- p
	<-g.release
	g.mu.Lock()
	g.inFlight[p]--
	g.total--
	g.mu.Unlock()
	n := 0
	for i := 1; i < len(args); {
		count := args[i+1].(int)
		n += count
		i += 2 + count*attemptFieldsForTest
	}
	answers := make([]any, n)
	for i := range answers {
		answers[i] = []any{int64(0), int64(0)}
	}
	return answers, nil
}

// attemptFieldsForTest is how many values each test attempt carries,
// kind included.
const attemptFieldsForTest = 6

func (g *gatedRun) partitionOf(keys []string) int {
	for p := range g.keys.Partitions() {
		if keys[len(keys)-1] == g.keys.StreamKey(p) {
			return p
		}
	}
	panic("no partition for " + keys[len(keys)-1])
}

func (g *gatedRun) counts(p int) (partition, total int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight[p], g.total
}

// skuOf returns a SKU id of partition p.
func skuOf(t *testing.T, keys Keyspace, p int) string {
	t.Helper()
	for i := range 10000 {
		if sku := fmt.Sprintf("s%d", i); keys.Partition(sku) == p {
			return sku
		}
	}
	t.Fatalf("no sku of partition %d", p)
	return ""
}

// TestAHotPartitionTakesExtraCallsOnlyWhileFewAreInFlight: a partition
// with attempts waiting always has a call in flight; a second, third and
// fourth only once a quarter of MaxBatch attempts wait and while the
// batcher has fewer than BatchesInFlight in flight in all, so many busy
// partitions send fuller calls instead of more.
func TestAHotPartitionTakesExtraCallsOnlyWhileFewAreInFlight(t *testing.T) {
	keys, err := NewKeyspace(16)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedRun{keys: keys, release: make(chan struct{}), inFlight: map[int]int{}, calls: make(chan int, 1000)}
	b := newBatcher(g.run, batcherConfig{keys: keys, entries: streamentry.EntriesPerCall, max: 128, inFlight: 4, timeout: 10 * time.Second})
	var wg sync.WaitGroup
	buy := func(sku string, n int) {
		for i := range n {
			wg.Go(func() {
				if _, err := b.do(context.Background(), sku, "d", fmt.Sprint("u", i), 1, fmt.Sprint("r", i), "e", ""); err != nil {
					t.Error(err)
				}
			})
		}
	}
	waitCalls := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-g.calls:
			case <-time.After(10 * time.Second):
				t.Fatalf("a call did not start")
			}
		}
		time.Sleep(50 * time.Millisecond) // let any call that should not start show itself
		if extra := len(g.calls); extra != 0 {
			t.Fatalf("%d calls started beyond the %d expected", extra, n)
		}
	}

	// One hot partition alone: a call for its first attempt, then one for
	// each 32 (128/4) that wait, up to four; the rest wait.
	hot := skuOf(t, keys, 0)
	buy(hot, 200)
	waitCalls(4)
	if p, total := g.counts(0); p != 4 || total != 4 {
		t.Fatalf("hot partition alone: %d calls of it in flight, %d in all; want 4 and 4", p, total)
	}
	// Six other partitions each get their one call although four are in
	// flight already, and the hot partition gets no fifth.
	for p := 1; p <= 6; p++ {
		buy(skuOf(t, keys, p), 1)
	}
	waitCalls(6)
	if p, total := g.counts(0); p != 4 || total != 10 {
		t.Fatalf("with six more partitions: %d calls of the hot one in flight, %d in all; want 4 and 10", p, total)
	}
	// A partition that has a call in flight gets no second one while ten
	// are in flight, however many attempts wait: they wait for its call.
	buy(skuOf(t, keys, 1), 40)
	waitCalls(0)
	close(g.release)
	wg.Wait()
}
