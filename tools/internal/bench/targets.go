package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// target is one way of selling: the library, the HTTP API, or the
// SQL-first baseline.
type target interface {
	name() string
	// prepare puts stock units of a new SKU on sale.
	prepare(ctx context.Context, sku string, stock int64) error
	deduct(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error)
	// catchUp waits until the ledger equals Redis and says how long that
	// took; has is false for a target without a ledger.
	catchUp(ctx context.Context, timeout time.Duration) (has, caughtUp bool, waited time.Duration, err error)
	// check reads what the target itself holds: units sold and units left.
	check(ctx context.Context) (sold, remaining int64, err error)
	close()
}

// batchTarget is a target that reports its purchase batches so far: script
// calls and the attempts they carried (invledger_purchase_batch_size's
// count and sum).
type batchTarget interface {
	batches(ctx context.Context) (calls, attempts float64, err error)
}

// multiSKUTarget is a target that can spread a sale over several SKUs
// (--skus): stocks[i] units of skus[i].
type multiSKUTarget interface {
	prepareSKUs(ctx context.Context, skus []string, stocks []int64) error
}

// inFlightTarget is a target that reports its purchase script calls in
// flight now (invledger_purchase_batches_in_flight); ok is false where it
// does not export them.
type inFlightTarget interface {
	callsInFlight(ctx context.Context) (calls float64, ok bool, err error)
}

// inFlightPeriod is how often a run samples the calls in flight.
const inFlightPeriod = 50 * time.Millisecond

// sampleInFlight averages t's calls in flight, sampled every
// inFlightPeriod until the returned func is called, which returns the
// mean; ok is false if no sample was taken.
func sampleInFlight(ctx context.Context, t inFlightTarget) (stop func() (mean float64, ok bool)) {
	done := make(chan struct{})
	var sum float64
	var n int
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(inFlightPeriod)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			v, ok, err := t.callsInFlight(ctx)
			if err != nil || !ok {
				return
			}
			sum, n = sum+v, n+1
		}
	}()
	return func() (float64, bool) {
		close(done)
		<-finished
		if n == 0 {
			return 0, false
		}
		return sum / float64(n), true
	}
}

// splitStock spreads stock units over n SKUs as evenly as whole units go.
func splitStock(stock int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = stock / int64(n)
		if int64(i) < stock%int64(n) {
			out[i]++
		}
	}
	return out
}

// memoryTarget is a target that reports what its sale cost Redis.
type memoryTarget interface {
	memory(ctx context.Context, sold int64) (*MemoryReport, error)
}

// soldOutSample is the CPU sample taken at a run's first sold_out answer,
// with the attempts answered by then and the units sold by then (of
// targets that tell a sale from a replay themselves).
type soldOutSample struct {
	cpuSample
	done, sold int64
}

// watchSoldOut samples cpu once, as soon as live counts a sold_out answer
// (polling every 2 ms), so Redis's CPU splits into the success path and the
// sold-out phase. stop ends the watch.
func watchSoldOut(cpu *cpuSampler, live *liveCounters) (<-chan soldOutSample, func()) {
	out := make(chan soldOutSample, 1)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if live.soldOut.Load() > 0 {
				out <- soldOutSample{cpuSample: cpu.sample(), done: live.done.Load(), sold: live.sold.Load()}
				return
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }
}

// runTarget runs one target through a sale of stock units spread over
// skus and reports it. cpu, if not nil, measures the cores each process
// used during the run.
func runTarget(ctx context.Context, t target, skus []string, spec loadSpec, stock int64, catchUp time.Duration, progress io.Writer, cpu *cpuSampler) (Report, error) {
	spec.SKUs = len(skus)
	if len(skus) == 1 {
		if err := t.prepare(ctx, skus[0], stock); err != nil {
			return Report{}, fmt.Errorf("%s: put %s on sale: %w", t.name(), skus[0], err)
		}
	} else {
		mt, ok := t.(multiSKUTarget)
		if !ok {
			return Report{}, fmt.Errorf("%s: cannot spread a sale over --skus %d", t.name(), len(skus))
		}
		if err := mt.prepareSKUs(ctx, skus, splitStock(stock, len(skus))); err != nil {
			return Report{}, fmt.Errorf("%s: put %d SKUs (%s ...) on sale: %w", t.name(), len(skus), skus[0], err)
		}
	}
	bt, batched := t.(batchTarget)
	var calls0, attempts0 float64
	if batched {
		var err error
		if calls0, attempts0, err = bt.batches(ctx); err != nil {
			return Report{}, fmt.Errorf("%s: read the purchase batch sizes: %w", t.name(), err)
		}
	}
	live := &liveCounters{}
	stop := benchProgress(progress, t.name(), spec, stock, live)
	var before cpuSample
	var soldOut <-chan soldOutSample
	if cpu != nil {
		before = cpu.sample()
		var stopWatch func()
		soldOut, stopWatch = watchSoldOut(cpu, live)
		defer stopWatch()
	}
	stopInFlight := func() (float64, bool) { return 0, false }
	if it, ok := t.(inFlightTarget); ok {
		stopInFlight = sampleInFlight(ctx, it)
	}
	run, err := runLoad(ctx, spec, t.deduct, live)
	inFlight, haveInFlight := stopInFlight()
	var after cpuSample
	if cpu != nil {
		after = cpu.sample()
	}
	stop()
	if err != nil {
		return Report{}, err
	}
	rep := summarize(t.name(), spec, stock, run)
	rep.SKU, rep.SKUs = skus[0], len(skus)
	if haveInFlight {
		rep.MeanCallsInFlight = inFlight
	}
	if cpu != nil {
		rep.CPU = cpu.cores(before, after, false)
	}
	// Per unit sold: a sale of one SKU sold out has sold its whole stock by
	// its first sold_out answer (every attempt buys one unit); over several
	// SKUs the first one sells out before the others, so the units sold by
	// then are counted.
	perSold := func(int64) {}
	if cpu != nil {
		select {
		case mid := <-soldOut:
			units := stock
			if len(skus) > 1 {
				units = mid.sold
			}
			rep.perPurchase(before, mid.cpuSample, units)
			rep.RedisUsecPerRefusal = redisUsecPer(mid.cpuSample, after, live.done.Load()-mid.done)
		default:
			perSold = func(sold int64) { rep.perPurchase(before, after, sold) }
		}
	}
	if batched {
		calls, attempts, err := bt.batches(ctx)
		if err != nil {
			return rep, fmt.Errorf("%s: read the purchase batch sizes: %w", t.name(), err)
		}
		if calls > calls0 {
			rep.MeanBatchSize = (attempts - attempts0) / (calls - calls0)
		}
	}
	has, caughtUp, _, err := t.catchUp(ctx, catchUp)
	if err != nil {
		return rep, fmt.Errorf("%s: compare the ledger with Redis: %w", t.name(), err)
	}
	if has {
		rep.setLedger(caughtUp, time.Since(run.stop))
	}
	sold, remaining, err := t.check(ctx)
	if err != nil {
		return rep, fmt.Errorf("%s: read what was sold: %w", t.name(), err)
	}
	rep.applyCheck(sold, remaining)
	perSold(rep.Sold)
	if mt, ok := t.(memoryTarget); ok {
		if rep.Memory, err = mt.memory(ctx, rep.Sold); err != nil {
			return rep, fmt.Errorf("%s: measure Redis memory: %w", t.name(), err)
		}
	}
	return rep, nil
}
