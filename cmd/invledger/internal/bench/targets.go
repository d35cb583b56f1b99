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

// memoryTarget is a target that reports what its sale cost Redis.
type memoryTarget interface {
	memory(ctx context.Context, sold int64) (*MemoryReport, error)
}

// soldOutSample is the CPU sample taken at a run's first sold_out answer,
// with the attempts answered by then.
type soldOutSample struct {
	cpuSample
	done int64
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
				out <- soldOutSample{cpuSample: cpu.sample(), done: live.done.Load()}
				return
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }
}

// runTarget runs one target through a sale and reports it.
// cpu, if not nil, measures the cores each process used during the run.
func runTarget(ctx context.Context, t target, sku string, spec loadSpec, stock int64, catchUp time.Duration, progress io.Writer, cpu *cpuSampler) (Report, error) {
	if err := t.prepare(ctx, sku, stock); err != nil {
		return Report{}, fmt.Errorf("%s: put %s on sale: %w", t.name(), sku, err)
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
	run, err := runLoad(ctx, spec, t.deduct, live)
	var after cpuSample
	if cpu != nil {
		after = cpu.sample()
	}
	stop()
	if err != nil {
		return Report{}, err
	}
	rep := summarize(t.name(), spec, stock, run)
	rep.SKU = sku
	if cpu != nil {
		rep.CPU = cpu.cores(before, after, false)
	}
	// Per unit sold: a sale sold out has sold its whole stock by its first
	// sold_out answer (every attempt buys one unit).
	perSold := func(int64) {}
	if cpu != nil {
		select {
		case mid := <-soldOut:
			rep.RedisUsecPerPurchase = redisUsecPer(before, mid.cpuSample, stock)
			rep.RedisUsecPerRefusal = redisUsecPer(mid.cpuSample, after, live.done.Load()-mid.done)
		default:
			perSold = func(sold int64) { rep.RedisUsecPerPurchase = redisUsecPer(before, after, sold) }
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
