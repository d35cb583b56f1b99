package bench

import (
	"context"
	"time"
)

// libTarget sells through the Go library in-process.
type libTarget struct {
	lib       Library
	errorCode func(error) string
	sku       string
	stock     int64
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

func (t *libTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku, t.stock = sku, stock
	before, err := t.lib.Footprint(ctx, sku)
	if err != nil {
		return err
	}
	t.before = before
	return t.lib.PutOnSale(ctx, sku, stock)
}

func (t *libTarget) memory(ctx context.Context, sold int64) (*MemoryReport, error) {
	return measureMemory(ctx, t.lib, t.sku, t.before, sold, t.retire, t.retireWait)
}

func (t *libTarget) deduct(ctx context.Context, _ *benchWorker, user, requestID string) (outcome, int64, error) {
	rc, err := t.lib.Deduct(ctx, t.sku, user, requestID)
	if err == nil {
		return outOK, rc.Seq, nil
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
	ok, waited, err := t.lib.WaitLedger(ctx, t.sku, timeout)
	return true, ok, waited, err
}

func (t *libTarget) check(ctx context.Context) (int64, int64, error) {
	remaining, err := t.lib.RedisStock(ctx, t.sku)
	if err != nil {
		return 0, 0, err
	}
	return t.stock - remaining, remaining, nil
}

func (t *libTarget) close() {
	if t.stopProj != nil {
		t.stopProj()
		<-t.projDone
	}
}
