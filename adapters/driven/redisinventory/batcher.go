package redisinventory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/domain"
)

// DefaultMaxBatch is InventoryConfig.MaxBatch's default: at 1,000 clients
// on one SKU, batches of 128 sold within a few percent of 256 and 512, with
// a quarter of their Redis latency per call (docs/benchmarks).
const DefaultMaxBatch = 128

// MaxBatchLimit is the largest InventoryConfig.MaxBatch: batch.lua's final
// HSET passes two arguments per new hold to one Lua call, whose stack holds
// about 8,000.
const MaxBatchLimit = 1000

// batcher coalesces the concurrent purchase attempts of one SKU (deducts
// and reserves) into one batch.lua call. While a call for a SKU is in
// flight, new attempts for it wait; when it returns, the attempts waiting
// go in the next call, in arrival order, up to max. There is no timer: an
// attempt on an idle SKU is sent at once, by its own goroutine, so a lone
// purchase costs what it did before batching. Every attempt is judged by
// Redis; nothing here answers for it.
//
// A batch is one SKU, so one Redis Cluster slot: a master that does not
// answer holds up only the attempts of its own SKUs.
type batcher struct {
	run     func(ctx context.Context, keys []string, args []any) ([]any, error)
	max     int
	timeout time.Duration
	observe func(size int)

	mu     sync.Mutex
	queues map[string]*skuQueue // the SKUs with a call in flight
}

// skuQueue holds the attempts of one SKU that wait for the call in flight.
type skuQueue struct {
	sku     string
	keys    []string
	waiting []*attempt
}

// attempt is one purchase attempt: its fields as batch.lua reads them
// (kind first), and where its answer goes.
type attempt struct {
	args  []any
	state atomic.Int32
	done  chan attemptAnswer
}

const (
	attemptWaiting int32 = iota
	attemptSent
	attemptAbandoned // its caller's deadline passed before it was sent
)

type attemptAnswer struct {
	reply []any
	err   error
}

func newBatcher(run func(ctx context.Context, keys []string, args []any) ([]any, error), max int, timeout time.Duration, observe func(int)) *batcher {
	if observe == nil {
		observe = func(int) {}
	}
	return &batcher{run: run, max: max, timeout: timeout, observe: observe, queues: map[string]*skuQueue{}}
}

// do runs one attempt on sku, whose batch.lua keys are keys, and returns
// its answer. It waits at most until ctx's deadline: an attempt whose
// deadline passes before it was sent is never sent, and one whose answer
// cannot be known by then (sent, not answered) is domain.ErrUnavailable
// too; both are retried with the same request id, which replays a receipt
// the script made.
func (b *batcher) do(ctx context.Context, sku string, keys []string, args []any) ([]any, error) {
	a := &attempt{args: args, done: make(chan attemptAnswer, 1)}
	b.mu.Lock()
	q, busy := b.queues[sku]
	if busy {
		q.waiting = append(q.waiting, a)
		b.mu.Unlock()
		return a.wait(ctx)
	}
	q = &skuQueue{sku: sku, keys: keys}
	b.queues[sku] = q
	b.mu.Unlock()

	// The SKU was idle: this goroutine sends its attempt alone, under its
	// own deadline, and hands the attempts that arrived meanwhile to a
	// goroutine that drains them.
	a.state.Store(attemptSent)
	b.send(ctx, q, []*attempt{a})
	if batch := b.next(q); batch != nil {
		go b.drain(q, batch)
	}
	return a.wait(ctx)
}

// wait returns the attempt's answer, or ErrUnavailable once ctx is done.
func (a *attempt) wait(ctx context.Context) ([]any, error) {
	select {
	case ans := <-a.done:
		return ans.reply, ans.err
	case <-ctx.Done():
	}
	if a.state.CompareAndSwap(attemptWaiting, attemptAbandoned) {
		return nil, fmt.Errorf("%w: the deadline passed while it waited for the purchases of the same sku before it (%w); "+
			"it was not sent: retry with the same request_id", domain.ErrUnavailable, ctx.Err())
	}
	select {
	case ans := <-a.done:
		return ans.reply, ans.err
	default:
		return nil, fmt.Errorf("%w: the deadline passed before Redis answered (%w); "+
			"retry with the same request_id, which returns the receipt if it was made", domain.ErrUnavailable, ctx.Err())
	}
}

// drain sends batch, then the attempts of q still waiting, a batch at a
// time, until none is left. Each call has the inventory's timeout; each
// caller still waits only as long as its own deadline allows.
func (b *batcher) drain(q *skuQueue, batch []*attempt) {
	for ; batch != nil; batch = b.next(q) {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		b.send(ctx, q, batch)
		cancel()
	}
}

// next takes the next batch of q, in arrival order, skipping attempts
// whose callers gave up. With none left it retires q and returns nil, so an
// idle SKU costs nothing and its next attempt is sent at once.
func (b *batcher) next(q *skuQueue) []*attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*attempt
	taken := 0
	for _, a := range q.waiting {
		if len(batch) == b.max {
			break
		}
		taken++
		if a.state.CompareAndSwap(attemptWaiting, attemptSent) {
			batch = append(batch, a)
		}
	}
	q.waiting = append(q.waiting[:0], q.waiting[taken:]...)
	if len(batch) == 0 {
		delete(b.queues, q.sku)
	}
	return batch
}

// send runs one batch.lua call for batch and answers every attempt of it.
func (b *batcher) send(ctx context.Context, q *skuQueue, batch []*attempt) {
	b.observe(len(batch))
	n := 1
	for _, a := range batch {
		n += len(a.args)
	}
	args := make([]any, 0, n)
	args = append(args, q.sku)
	for _, a := range batch {
		args = append(args, a.args...)
	}
	v, err := b.run(ctx, q.keys, args)
	if err == nil && len(v) != len(batch) {
		err = fmt.Errorf("%w: batch.lua answered %d of %d attempts", ErrScript, len(v), len(batch))
	}
	for i, a := range batch {
		if err != nil {
			a.done <- attemptAnswer{err: err}
			continue
		}
		reply, ok := v[i].([]any)
		if !ok {
			a.done <- attemptAnswer{err: fmt.Errorf("%w: batch.lua's answer %d is %T", ErrScript, i, v[i])}
			continue
		}
		a.done <- attemptAnswer{reply: reply}
	}
}
