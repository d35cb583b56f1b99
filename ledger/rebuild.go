package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// RebuildBalance recomputes one SKU's balances row from its ledger rows
// (sum of deltas, highest seq), safely while the projector runs. The
// reconciler repairs balances drift with it.
func (r *Recovery) RebuildBalance(ctx context.Context, sku domain.SKUID) error {
	corrected, err := r.cfg.Balances.RebuildBalance(ctx, sku)
	if err != nil {
		return fmt.Errorf("rebuild balance of %s: %w", sku, err)
	}
	return r.recordRebuild(ctx, sku.String(), corrected)
}

// recordRebuild records a rebuild that changed the balances row; one that
// found it right changed nothing.
func (r *Recovery) recordRebuild(ctx context.Context, sku string, corrected bool) error {
	if !corrected {
		return nil
	}
	return recordOperation(ctx, r.cfg.Operations, sku, domain.ActionRebuild, "balances row recomputed from the ledger")
}

// RebuildReport sums up RebuildBalances.
type RebuildReport struct {
	// SKUs is how many balances were recomputed; Corrected lists those
	// whose row was wrong or missing.
	SKUs      int
	Corrected []string
	// Failed lists the SKUs that could not be rebuilt; the error says why.
	Failed []string
}

// RebuildBalances recomputes the balances row of every SKU that has ledger
// rows or a balances row, one SKU per transaction, so the projector waits at
// most for one SKU at a time. A SKU that fails is listed and the others are
// still rebuilt; the error joins every failure. progress, if not nil, is
// called after each SKU.
func (r *Recovery) RebuildBalances(ctx context.Context, progress func(done, total int)) (RebuildReport, error) {
	skus, err := r.cfg.Balances.BalanceSKUs(ctx)
	if err != nil {
		return RebuildReport{}, fmt.Errorf("rebuild balances: %w", err)
	}
	report := RebuildReport{Corrected: []string{}}
	var errs []error
	for i, sku := range skus {
		if err := ctx.Err(); err != nil {
			return report, errors.Join(append(errs, err)...)
		}
		id, err := domain.NewSKUID(sku)
		var corrected bool
		if err == nil {
			corrected, err = r.cfg.Balances.RebuildBalance(ctx, id)
		}
		if err == nil {
			err = r.recordRebuild(ctx, sku, corrected)
		}
		if err != nil {
			report.Failed = append(report.Failed, sku)
			errs = append(errs, fmt.Errorf("rebuild balance of %s: %w", sku, err))
		} else {
			report.SKUs++
			if corrected {
				report.Corrected = append(report.Corrected, sku)
				r.cfg.Logger.Warn("balances row corrected from the ledger", "sku", sku)
			}
		}
		if progress != nil {
			progress(i+1, len(skus))
		}
	}
	return report, errors.Join(errs...)
}
