package redisinventory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// DefaultMaxBatch is InventoryConfig.MaxBatch's default: at 1,000 clients
// on one SKU, batches of 128 sold within a few percent of 256 and 512, with
// a quarter of their Redis latency per call (docs/benchmarks).
const DefaultMaxBatch = 128

// MaxBatchLimit is the largest InventoryConfig.MaxBatch: batch.lua's HSET
// of a SKU passes two arguments per new hold to one Lua call, whose stack
// holds about 8,000.
const MaxBatchLimit = 1000

// DefaultBatchesInFlight is InventoryConfig.BatchesInFlight's default: with
// two or more calls in flight, Redis runs one while the reply of another
// travels back and the next is built (docs/benchmarks).
const DefaultBatchesInFlight = 4

// MaxBatchesInFlight is the largest InventoryConfig.BatchesInFlight.
const MaxBatchesInFlight = 64

// scriptMode is batch.lua's ARGV[1] for e.
func scriptMode(e streamentry.StreamEntries) string {
	if e == streamentry.EntriesPerEvent {
		return "e"
	}
	return "c"
}

// batcher coalesces the concurrent purchase attempts (deducts and
// reserves) of the SKUs of one partition into batch.lua calls. A partition
// with attempts always has a call in flight; it may have up to inFlight
// while extraAfter of its attempts wait and the calls in flight of all
// partitions number fewer than inFlight.
// So a few hot partitions keep Redis busy while their replies travel back,
// and many partitions, which keep it busy anyway, send fewer, fuller
// calls: with four calls of every partition in flight, 200 SKUs at 200
// clients went in batches of 2.5 and cost Redis 1.7 times the seed-like
// script's CPU per purchase (docs/benchmarks). While a partition may not start another
// call, new attempts wait; when a call returns, the attempts waiting go in
// the next call, in arrival order, up to max. There is no timer: an
// attempt that may start a call is sent at once, by its own goroutine, so
// a lone purchase costs what it did before batching. Every attempt is
// judged by Redis; nothing here answers for it.
//
// Calls of one partition in flight together may run in any order: each is
// atomic, and an attempt's call is in flight during its whole wait, so the
// history stays linearizable. There is no fairness across them, as there
// is none across serve processes.
//
// A partition is one Redis Cluster slot: a master that does not answer
// holds up only the attempts of its own partitions.
type batcher struct {
	run      func(ctx context.Context, keys []string, args []any) ([]any, error)
	keys     Keyspace
	mode     string
	max      int
	inFlight int
	timeout  time.Duration
	observe  func(size int)
	calls    func(delta int)

	// extraAfter is how many attempts of a partition must wait before it
	// starts another call beside the one in flight: each call is one more
	// pass of Redis's event loop, so one more AOF fsync under appendfsync
	// always, and a second call of a few attempts costs more than it saves.
	extraAfter int

	mu     sync.Mutex
	queues map[int]*partitionQueue // the partitions with a call in flight
	total  int                     // calls in flight, all partitions
}

// partitionQueue holds the attempts of one partition that wait for a free
// slot.
type partitionQueue struct {
	partition int
	inFlight  int
	waiting   []*attempt
}

// attempt is one purchase attempt: its SKU, its fields as batch.lua reads
// them (kind first), and where its answer goes.
type attempt struct {
	sku    string
	fields [8]any
	n      int
	state  atomic.Int32
	done   chan attemptAnswer
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

// batcherConfig is what a batcher is built from.
type batcherConfig struct {
	keys     Keyspace
	entries  streamentry.StreamEntries
	max      int
	inFlight int
	timeout  time.Duration
	observe  func(size int)
	calls    func(delta int)
}

func newBatcher(run func(ctx context.Context, keys []string, args []any) ([]any, error), c batcherConfig) *batcher {
	if c.observe == nil {
		c.observe = func(int) {}
	}
	if c.calls == nil {
		c.calls = func(int) {}
	}
	return &batcher{run: run, keys: c.keys, mode: scriptMode(c.entries), max: c.max, inFlight: c.inFlight, extraAfter: max(1, c.max/4),
		timeout: c.timeout, observe: c.observe, calls: c.calls, queues: map[int]*partitionQueue{}}
}

// do runs one attempt on sku, whose fields after kind batch.lua reads, and
// returns its answer. It waits at most until ctx's deadline: an attempt
// whose deadline passes before it was sent is never sent, and one whose
// answer cannot be known by then (sent, not answered) is
// domain.ErrUnavailable too; both are retried with the same request id,
// which replays a receipt the script made.
func (b *batcher) do(ctx context.Context, sku string, fields ...any) ([]any, error) {
	a := &attempt{sku: sku, done: make(chan attemptAnswer, 1)}
	a.n = copy(a.fields[:], fields)
	p := b.keys.Partition(sku)
	b.mu.Lock()
	q := b.queues[p]
	if q == nil {
		q = &partitionQueue{partition: p}
		b.queues[p] = q
	}
	if q.inFlight > 0 && (q.inFlight == b.inFlight || b.total >= b.inFlight || len(q.waiting)+1 < b.extraAfter) {
		q.waiting = append(q.waiting, a)
		b.mu.Unlock()
		return a.wait(ctx)
	}
	// The partition may start a call, so nothing of it waits: this
	// goroutine sends its attempt alone, under its own deadline, and hands
	// the attempts that arrived meanwhile to a goroutine that drains them.
	q.inFlight++
	b.total++
	if len(q.waiting) > 0 {
		// Attempts wait that the other partitions' calls kept back: they
		// go first, and this one with them.
		q.waiting = append(q.waiting, a)
		batch := b.take(q)
		b.mu.Unlock()
		go b.drain(q, batch)
		return a.wait(ctx)
	}
	b.mu.Unlock()
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
		return nil, fmt.Errorf("%w: the deadline passed while it waited for the purchases of the same partition before it (%w); "+
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
// time, until none is left; it holds one of q's slots throughout. Each call
// has the inventory's timeout; each caller still waits only as long as its
// own deadline allows.
func (b *batcher) drain(q *partitionQueue, batch []*attempt) {
	for ; batch != nil; batch = b.next(q) {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		b.send(ctx, q, batch)
		cancel()
	}
}

// next takes the next batch of q, in arrival order, skipping attempts whose
// callers gave up, for a slot whose call just returned. With none left it
// frees the slot, and retires q once no slot is taken, so an idle partition
// costs nothing and its next attempt is sent at once.
func (b *batcher) next(q *partitionQueue) []*attempt {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := b.take(q)
	if len(batch) == 0 {
		q.inFlight--
		b.total--
		if q.inFlight == 0 {
			delete(b.queues, q.partition)
		}
		return nil
	}
	return batch
}

// take removes the next batch from q's waiting attempts, in arrival order,
// skipping those whose callers gave up. b.mu is held.
func (b *batcher) take(q *partitionQueue) []*attempt {
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
	n := copy(q.waiting, q.waiting[taken:])
	clear(q.waiting[n:])
	q.waiting = q.waiting[:n]
	return batch
}

// send runs one batch.lua call for batch and answers every attempt of it.
func (b *batcher) send(ctx context.Context, q *partitionQueue, batch []*attempt) {
	b.observe(len(batch))
	b.calls(1)
	defer b.calls(-1)
	order := groupBySKU(batch)
	keys, args := b.callArgs(q.partition, order)
	v, err := b.run(ctx, keys, args)
	if err == nil && len(v) != len(order) {
		err = fmt.Errorf("%w: batch.lua answered %d of %d attempts", ErrScript, len(v), len(order))
	}
	for i, a := range order {
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

// groupBySKU orders batch as batch.lua takes it: the attempts of each SKU
// together, in arrival order, the SKUs in the order of their first
// attempt. batch.lua answers in this order.
func groupBySKU(batch []*attempt) []*attempt {
	if len(batch) == 1 {
		return batch
	}
	order := make([]*attempt, 0, len(batch))
	if len(batch) > groupScanLimit {
		groups := map[string][]*attempt{}
		var skus []string
		for _, a := range batch {
			if _, ok := groups[a.sku]; !ok {
				skus = append(skus, a.sku)
			}
			groups[a.sku] = append(groups[a.sku], a)
		}
		for _, sku := range skus {
			order = append(order, groups[sku]...)
		}
		return order
	}
	placed := make([]bool, len(batch))
	for i, a := range batch {
		if placed[i] {
			continue
		}
		for j := i; j < len(batch); j++ {
			if !placed[j] && batch[j].sku == a.sku {
				order, placed[j] = append(order, batch[j]), true
			}
		}
	}
	return order
}

// groupScanLimit is the largest batch groupBySKU groups by scanning it
// once per SKU; a larger one is grouped through a map.
const groupScanLimit = 32

// callArgs are batch.lua's keys and arguments for the attempts of order,
// grouped by SKU (groupBySKU).
func (b *batcher) callArgs(partition int, order []*attempt) (keys []string, args []any) {
	groups, n := 0, 1
	for i, a := range order {
		if i == 0 || a.sku != order[i-1].sku {
			groups++
		}
		n += a.n
	}
	keys = make([]string, 0, 3*groups+2)
	args = make([]any, 0, n+2*groups)
	args = append(args, b.mode)
	for i := 0; i < len(order); {
		sku := order[i].sku
		j := i + 1
		for j < len(order) && order[j].sku == sku {
			j++
		}
		keys = append(keys, b.keys.SKUKey(sku), b.keys.BuyersKey(sku), b.keys.RequestsKey(sku))
		args = append(args, sku, j-i)
		for _, a := range order[i:j] {
			args = append(args, a.fields[:a.n]...)
		}
		i = j
	}
	keys = append(keys, b.keys.ExpiryKey(partition), b.keys.StreamKey(partition))
	return keys, args
}
