package bench

import (
	"context"
	"time"
)

// libTarget sells through the Go library in-process.
type libTarget struct {
	lib       Library
	errorCode func(error) string
	sku       string // the first of skus
	skus      []string
	stock     int64 // over all of skus
	stopProj  context.CancelFunc
	projDone  chan error
	// unprojected is set when nothing projects the target's Redis (compare
	// with --projector=false): the ledger is not compared then.
	unprojected bool
	// retire, when set, retires the SKU after the sale to measure Redis
	// after it, waiting up to retireWait for the ledger; before is Redis
	// before the sale.
	retire     bool
	retireWait time.Duration
	before     Footprint
}

// newLibTarget sells through site's library. With projector set it runs
// the projector in this process, as serve --components projector would.
func newLibTarget(ctx context.Context, site *Site, errorCode func(error) string, projector bool) *libTarget {
	t := &libTarget{lib: site.Library, errorCode: errorCode}
	if projector {
		projCtx, cancel := context.WithCancel(ctx)
		t.stopProj, t.projDone = cancel, make(chan error, 1)
		go func() { t.projDone <- site.Project(projCtx) }()
	}
	return t
}

func (t *libTarget) name() string { return "lib" }

func (t *libTarget) batches(context.Context) (calls, attempts float64, err error) {
	return t.lib.PurchaseBatches()
}

func (t *libTarget) callsInFlight(context.Context) (float64, bool, error) {
	return t.lib.PurchaseCallsInFlight()
}

func (t *libTarget) prepare(ctx context.Context, sku string, stock int64) error {
	return t.prepareSKUs(ctx, []string{sku}, []int64{stock})
}

func (t *libTarget) prepareSKUs(ctx context.Context, skus []string, stocks []int64) error {
	t.sku, t.skus, t.stock = skus[0], skus, 0
	before, err := t.lib.Footprint(ctx, t.sku)
	if err != nil {
		return err
	}
	t.before = before
	for i, sku := range skus {
		if err := t.lib.PutOnSale(ctx, sku, stocks[i]); err != nil {
			return err
		}
		t.stock += stocks[i]
	}
	return nil
}

// memory measures the first SKU only, so it is reported for one-SKU sales.
func (t *libTarget) memory(ctx context.Context, sold int64) (*MemoryReport, error) {
	if len(t.skus) > 1 {
		return nil, nil
	}
	return measureMemory(ctx, t.lib, t.sku, t.before, sold, t.retire, t.retireWait)
}

func (t *libTarget) deduct(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error) {
	rc, err := t.lib.Deduct(ctx, t.skus[w.sku], user, requestID)
	if err == nil {
		// The library tells a replay itself: seqs, counted per SKU, could
		// not tell them apart over several SKUs.
		if rc.Replayed {
			return outReplayed, rc.Seq, nil
		}
		return outSold, rc.Seq, nil
	}
	// The library's one error table names the error; the bench only
	// counts by that name, as it does for the HTTP API's answers.
	o := codeOutcome(t.errorCode(err))
	if o.unexpected() {
		return o, 0, err
	}
	return o, 0, nil
}

func (t *libTarget) catchUp(ctx context.Context, timeout time.Duration) (bool, bool, time.Duration, error) {
	if t.unprojected {
		return false, false, 0, nil
	}
	start := time.Now()
	for _, sku := range t.skus {
		ok, _, err := t.lib.WaitLedger(ctx, sku, max(0, timeout-time.Since(start)))
		if err != nil || !ok {
			return true, false, time.Since(start), err
		}
	}
	return true, true, time.Since(start), nil
}

func (t *libTarget) check(ctx context.Context) (int64, int64, error) {
	var remaining int64
	for _, sku := range t.skus {
		r, err := t.lib.RedisStock(ctx, sku)
		if err != nil {
			return 0, 0, err
		}
		remaining += r
	}
	return t.stock - remaining, remaining, nil
}

func (t *libTarget) close() {
	if t.stopProj != nil {
		t.stopProj()
		<-t.projDone
	}
}
