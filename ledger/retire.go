package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/invledger/invledger/domain"
)

// RetireResult reports a retirement. AlreadyRetired is true when the SKU
// was retired before; RetiredAt and Seq are then the original ones.
type RetireResult struct {
	SKU            string
	Seq            int64
	RetiredAt      time.Time
	AlreadyRetired bool
}

// RetireSKU is the last step of a sale's life, after close and
// archive-buyers: it removes every key of the SKU from Redis, leaving a
// tombstone in its partition's set, and records the SKU as retired in SQL.
// From then on the ledger answers for it: a purchase is refused as closed,
// a retry of an old request gets its receipt from the ledger, and a
// release is domain.ErrRetired until restore-redis brings the SKU back.
//
// It refuses, changing nothing, unless the SKU is closed (ErrSKUOpen), its
// buyers are archived at its current seq (ErrNotArchived), the ledger folds
// to Redis's stock and seq (ErrLedgerBehind) and a reconciliation of the
// SKU finds no drift (ErrDrift or ErrLedgerBehind). Once holds exist, an
// open hold refuses it too, beside the seq check of retire.lua. The Redis
// step is one compare-and-set on the seq that was checked, so a release
// that slips in makes it start over, up to Attempts times. It is
// idempotent, and a run cut short (between Redis and SQL) is completed by
// running it again.
func (a *Archiver) RetireSKU(ctx context.Context, sku string) (RetireResult, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return RetireResult{}, err
	}
	for attempt := 1; ; attempt++ {
		res, err := a.retireOnce(ctx, id)
		if !errors.Is(err, ErrSeqMoved) || attempt == a.cfg.Attempts {
			if errors.Is(err, ErrSeqMoved) {
				err = fmt.Errorf("retire %s: %w %d times: releases keep coming; try again later", sku, err, attempt)
			}
			return res, err
		}
		a.cfg.Logger.Debug("the sku moved while retiring; checking again", "sku", sku, "attempt", attempt)
	}
}

func (a *Archiver) retireOnce(ctx context.Context, id domain.SKUID) (RetireResult, error) {
	sku := id.String()
	rec, err := a.cfg.SKUs.Record(ctx, id)
	if err != nil {
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	}
	if rec.Retired != nil {
		return RetireResult{SKU: sku, Seq: rec.Retired.Seq, RetiredAt: rec.Retired.At, AlreadyRetired: true}, nil
	}
	live, err := a.cfg.Inventory.State(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotWarmed):
		// Either a run retired it in Redis and stopped before SQL, or
		// Redis does not hold it at all.
		return a.completeRetirement(ctx, id, rec, err)
	case err != nil:
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	case !live.Verified:
		return RetireResult{}, fmt.Errorf("retire %s: %w: Redis restarted and this sku is not verified against the ledger yet; try again shortly",
			sku, domain.ErrRecovering)
	case live.Status != domain.StatusClosed:
		return RetireResult{}, fmt.Errorf("retire %s: %w: close it first with `invledger sku close %s`, then archive its buyers",
			sku, ErrSKUOpen, sku)
	case rec.Archive == nil || rec.Archive.Seq != live.Seq:
		return RetireResult{}, fmt.Errorf("retire %s: %w (Redis is at seq %d): run `invledger archive-buyers --sku %s` first",
			sku, ErrNotArchived, live.Seq, sku)
	}
	fold := domain.NewSKUState(sku)
	if err := a.cfg.Ledger.ScanSKU(ctx, id, fold.Apply); err != nil {
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	}
	if fold.Seq != live.Seq || fold.Stock != live.Stock {
		return RetireResult{}, fmt.Errorf("retire %s: %w: the ledger folds to stock %d at seq %d, Redis holds stock %d at seq %d; "+
			"wait for the projector to catch up, or run `invledger reconcile --sku %s`",
			sku, ErrLedgerBehind, fold.Stock, fold.Seq, live.Stock, live.Seq, sku)
	}
	if err := a.cfg.Reconcile(ctx, sku); err != nil {
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	}
	already, err := a.cfg.Redis.Retire(ctx, id, live.Seq)
	switch {
	case errors.Is(err, ErrSeqMoved):
		return RetireResult{}, err
	case err != nil:
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	}
	return a.recordRetired(ctx, id, Retirement{Seq: live.Seq, At: time.Now()}, already)
}

// completeRetirement finishes a retirement that Redis made and SQL did not
// record, found by the tombstone; a SKU Redis does not hold otherwise is
// refused with notWarmed.
func (a *Archiver) completeRetirement(ctx context.Context, id domain.SKUID, rec SKURecord, notWarmed error) (RetireResult, error) {
	sku := id.String()
	retired, err := a.cfg.Inventory.Retired(ctx, id)
	switch {
	case err != nil:
		return RetireResult{}, fmt.Errorf("retire %s: %w", sku, err)
	case !retired || rec.Archive == nil:
		return RetireResult{}, fmt.Errorf("retire %s: %w: Redis does not hold this sku; if it lost it, run `invledger restore-redis --sku %s` first",
			sku, notWarmed, sku)
	}
	// Retirement needs an archive at the seq it retires at, and nothing
	// moves a SKU once Redis dropped it: the archive's seq is that seq.
	return a.recordRetired(ctx, id, Retirement{Seq: rec.Archive.Seq, At: time.Now()}, true)
}

func (a *Archiver) recordRetired(ctx context.Context, id domain.SKUID, r Retirement, already bool) (RetireResult, error) {
	sku := id.String()
	stored, err := a.cfg.SKUs.RecordRetired(ctx, id, r)
	if err != nil {
		return RetireResult{}, fmt.Errorf("retire %s: retired in Redis, but recording it in PostgreSQL failed; run retire again: %w", sku, err)
	}
	a.cfg.Logger.Info("sku retired from Redis", "sku", sku, "seq", stored.Seq, "already_retired_in_redis", already)
	if err := recordOperation(ctx, a.cfg.Operations, sku, domain.ActionRetire, fmt.Sprintf("seq=%d", stored.Seq)); err != nil {
		return RetireResult{}, err
	}
	return RetireResult{SKU: sku, Seq: stored.Seq, RetiredAt: stored.At}, nil
}

// RetireClosed retires every SKU closed, or reopened by a restore, at least
// olderThan ago: the window in which a gateway may still retry is then
// over. Each SKU's buyers are archived first where they are not yet at its
// current seq. SKUs that cannot be retired now are skipped and their errors
// joined; the next call tries them again.
func (a *Archiver) RetireClosed(ctx context.Context, olderThan time.Duration) ([]RetireResult, error) {
	ctx = WithDefaultActor(ctx, "system:retirer")
	skus, err := a.cfg.SKUs.ClosedUnretired(ctx, olderThan)
	if err != nil {
		return nil, fmt.Errorf("retire closed skus: %w", err)
	}
	return eachSKU(ctx, skus, func(ctx context.Context, sku string) (RetireResult, error) {
		if _, err := a.ArchiveBuyers(ctx, sku); err != nil {
			return RetireResult{}, err
		}
		return a.RetireSKU(ctx, sku)
	})
}
