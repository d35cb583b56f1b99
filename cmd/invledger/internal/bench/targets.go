package bench

import (
	"context"
	"fmt"
	"io"
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

// memoryTarget is a target that reports what its sale cost Redis.
type memoryTarget interface {
	memory(ctx context.Context, sold int64) (*MemoryReport, error)
}

// runTarget runs one target through a sale and reports it.
// cpu, if not nil, measures the cores each process used during the run.
func runTarget(ctx context.Context, t target, sku string, spec loadSpec, stock int64, catchUp time.Duration, progress io.Writer, cpu *cpuSampler) (Report, error) {
	if err := t.prepare(ctx, sku, stock); err != nil {
		return Report{}, fmt.Errorf("%s: put %s on sale: %w", t.name(), sku, err)
	}
	live := &liveCounters{}
	stop := benchProgress(progress, t.name(), spec, stock, live)
	var before cpuSample
	if cpu != nil {
		before = cpu.sample()
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
	if mt, ok := t.(memoryTarget); ok {
		if rep.Memory, err = mt.memory(ctx, rep.Sold); err != nil {
			return rep, fmt.Errorf("%s: measure Redis memory: %w", t.name(), err)
		}
	}
	return rep, nil
}
