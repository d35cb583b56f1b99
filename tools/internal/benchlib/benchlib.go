// Package benchlib is the application as bench's lib and raw targets drive
// it: the purchase path, and the end of a sale's life, whose Redis memory
// the bench reports.
package benchlib

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/benchkit"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/tools/internal/bench"
)

// Library is Service as the bench uses it, over App's servers.
type Library struct {
	Service *ledger.Service
	App     *app.Application // the ledger the service writes to
}

var (
	_ bench.Library = (*Library)(nil)
	_ bench.Keys    = benchkit.Keys(nil)
)

// PutOnSale creates sku with stock units, one per buyer, and warms it.
func (l *Library) PutOnSale(ctx context.Context, sku string, stock int64) error {
	if _, _, err := l.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: stock, PerUserLimit: 1}); err != nil {
		return err
	}
	_, err := l.Service.Warm(ctx, sku)
	return err
}

// Deduct buys one unit of sku for user under requestID.
func (l *Library) Deduct(ctx context.Context, sku, user, requestID string) (bench.Receipt, error) {
	cmd, err := ledger.NewDeductCommand(sku, user, 1, requestID)
	if err != nil {
		return bench.Receipt{}, err
	}
	rc, err := l.Service.Deduct(ctx, cmd)
	return bench.Receipt{Seq: rc.Seq, EventID: rc.EventID, Replayed: rc.Replayed}, err
}

// RedisStock is the stock Redis holds for sku.
func (l *Library) RedisStock(ctx context.Context, sku string) (int64, error) {
	v, err := l.Service.State(ctx, sku)
	if err != nil {
		return 0, err
	}
	if v.RedisStock == nil {
		return 0, fmt.Errorf("sku %s is no longer in Redis", sku)
	}
	return *v.RedisStock, nil
}

// WaitLedger polls until the ledger equals Redis for sku, up to timeout.
func (l *Library) WaitLedger(ctx context.Context, sku string, timeout time.Duration) (bool, time.Duration, error) {
	return benchkit.WaitLedgerEqualsRedis(ctx, l.App, sku, timeout)
}

// PurchaseBatches reads invledger_purchase_batch_size from App's registry:
// the purchase script calls so far and the attempts they carried.
func (l *Library) PurchaseBatches() (calls, attempts float64, err error) {
	families, err := l.App.Metrics.Registry.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, f := range families {
		if f.GetName() == "invledger_purchase_batch_size" && len(f.GetMetric()) == 1 {
			h := f.GetMetric()[0].GetHistogram()
			return float64(h.GetSampleCount()), h.GetSampleSum(), nil
		}
	}
	return 0, 0, errors.New("invledger_purchase_batch_size is not registered")
}

// PurchaseCallsInFlight reads invledger_purchase_batches_in_flight from
// App's registry, summed over its series; ok is false while the library
// does not register it.
func (l *Library) PurchaseCallsInFlight() (calls float64, ok bool, err error) {
	families, err := l.App.Metrics.Registry.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, f := range families {
		if f.GetName() == "invledger_purchase_batches_in_flight" {
			for _, m := range f.GetMetric() {
				calls += m.GetGauge().GetValue()
			}
			return calls, true, nil
		}
	}
	return 0, false, nil
}

// Footprint measures what sku costs Redis.
func (l *Library) Footprint(ctx context.Context, sku string) (bench.Footprint, error) {
	f, err := benchkit.ReadFootprint(ctx, l.App, sku)
	return bench.Footprint{UsedMemory: f.UsedMemory, SKUHash: f.SKU, Buyers: f.Buyers, Requests: f.Requests, Tombstones: f.Tombstones}, err
}

// Retire ends sku's sale as an operator would: close, archive-buyers once
// the ledger has caught up (within timeout), retire.
func (l *Library) Retire(ctx context.Context, sku string, timeout time.Duration) error {
	if _, err := l.App.Archiver.CloseSKU(ctx, sku); err != nil {
		return err
	}
	for deadline := time.Now().Add(timeout); ; {
		_, err := l.App.Archiver.ArchiveBuyers(ctx, sku)
		if err == nil {
			break
		}
		if !errors.Is(err, ledger.ErrLedgerBehind) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	_, err := l.App.Archiver.RetireSKU(ctx, sku)
	return err
}
