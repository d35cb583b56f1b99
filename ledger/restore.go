package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/invledger/invledger/domain"
)

// RecoveryConfig wires a Recovery to its ports.
type RecoveryConfig struct {
	Ledger   LedgerScanner
	SKUs     SKUCatalog
	Balances BalanceRecomputer
	Redis    InventoryRestorer
	// Records rewrites single corrupt records (RepairRecord).
	Records RecordRewriter
	// Operations records who restored and rebuilt each SKU.
	Operations OperationLog
	// ConsumerGroup is the projector's consumer group, recreated on the
	// partition streams when Redis lost them.
	ConsumerGroup string
	// Writers is how many SKUs RestoreAll writes into Redis at once while
	// the ledger scan folds the next ones. Default 4.
	Writers int
	Logger  *slog.Logger
}

func (c *RecoveryConfig) setDefaults() {
	if c.Writers == 0 {
		c.Writers = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every missing or invalid setting at once.
func (c RecoveryConfig) Validate() error {
	var errs []error
	for name, missing := range map[string]bool{
		"Ledger": c.Ledger == nil, "SKUs": c.SKUs == nil, "Balances": c.Balances == nil, "Redis": c.Redis == nil,
		"Records": c.Records == nil, "Operations": c.Operations == nil,
	} {
		if missing {
			errs = append(errs, fmt.Errorf("recovery: %s is required", name))
		}
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("recovery: ConsumerGroup is required"))
	}
	if c.Writers < 1 {
		errs = append(errs, errors.New("recovery: Writers must be at least 1"))
	}
	return errors.Join(errs...)
}

// Recovery rebuilds the views of the ledger: Redis after it lost its data,
// and the balances projection. The ledger is the only input; both are safe
// while the API and the projector run.
type Recovery struct {
	cfg RecoveryConfig
}

// NewRecovery validates cfg and returns a Recovery.
func NewRecovery(cfg RecoveryConfig) (*Recovery, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Recovery{cfg: cfg}, nil
}

// RestoreSKU rebuilds one SKU's Redis state from its ledger fold: stock, seq,
// limit, status, buyers, and the receipt of every request, so retries still
// get their original receipts and past buyers are still refused. The SKU is
// fenced while it is written: purchases get domain.ErrRecovering, never a
// half-restored state. It refuses with ErrRedisAhead when Redis holds events
// the ledger does not have yet, with domain.ErrNotFound when the SKU is
// undefined or has no ledger events, and with domain.ErrCorruptLedger when
// the ledger does not fold (a missing seq: events not projected yet, or lost).
// A retired SKU comes back too, closed, and is no longer retired: releases
// work again, and it can be archived and retired again later.
func (r *Recovery) RestoreSKU(ctx context.Context, sku string) error {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return err
	}
	return r.restoreSKU(ctx, id)
}

func (r *Recovery) restoreSKU(ctx context.Context, id domain.SKUID) error {
	sku := id.String()
	rec, err := r.cfg.SKUs.Record(ctx, id)
	if err != nil {
		return fmt.Errorf("restore %s: %w", sku, err)
	}
	if err := r.cfg.Redis.EnsureStreams(ctx, r.cfg.ConsumerGroup); err != nil {
		return fmt.Errorf("restore %s: %w", sku, err)
	}
	f := newFolder(sku)
	err = r.cfg.Ledger.ScanSKU(ctx, id, func(e domain.Event) error {
		f.apply(e)
		return f.err
	})
	if err != nil {
		return foldError(sku, err)
	}
	if f.state.Seq == 0 {
		return fmt.Errorf("restore %s: %w: the ledger holds no events of this sku; if it was never warmed, run `invledger sku warm %s`",
			sku, domain.ErrNotFound, sku)
	}
	if err := r.restore(ctx, f.image(rec)); err != nil {
		return err
	}
	if rec.Retired != nil {
		// Redis holds the SKU again, so SQL must stop calling it retired;
		// if this write fails, the restore is rerun and records it.
		if err := r.cfg.SKUs.RecordReopened(ctx, id); err != nil {
			return fmt.Errorf("restore %s: restored into Redis, but recording that it is no longer retired failed; run the restore again: %w", sku, err)
		}
		r.cfg.Logger.Info("retired sku restored into Redis: releases work again", "sku", sku)
	}
	return nil
}

// RepairSKU brings back what Redis lost of a SKU, as the reconciler's
// repair: a retired SKU gets its tombstone back and stays retired, any
// other SKU is restored as RestoreSKU does. Bringing a retired SKU back
// into Redis is the operator's choice, not a repair's.
func (r *Recovery) RepairSKU(ctx context.Context, id domain.SKUID) error {
	rec, err := r.cfg.SKUs.Record(ctx, id)
	if err != nil {
		return fmt.Errorf("repair %s: %w", id, err)
	}
	if rec.Retired == nil {
		return r.restoreSKU(ctx, id)
	}
	if _, err := r.cfg.Redis.Entomb(ctx, id); err != nil {
		return fmt.Errorf("repair %s: %w", id, err)
	}
	return nil
}

// RestoreReport sums up RestoreAll.
type RestoreReport struct {
	// SKUs is how many SKUs were restored, Rows how many ledger rows they
	// folded. Skipped SKUs are defined but have no ledger events. Retired
	// counts the SKUs among SKUs that were retired: they are not restored
	// but get their tombstones back.
	SKUs    int
	Rows    int64
	Skipped int
	Retired int
	// Failed lists the SKUs that could not be restored; the error says why.
	Failed []string
}

// RestoreAll does RestoreSKU for every SKU in one streaming pass over the
// ledger, folding SKU by SKU while earlier SKUs are written to Redis, so
// memory holds a few SKUs, never the ledger. A SKU that fails is listed in
// the report and the others are still restored; the error joins every
// failure. progress, if not nil, is called after each SKU with the SKUs done
// out of total and the ledger rows folded so far; calls never overlap.
func (r *Recovery) RestoreAll(ctx context.Context, progress func(done, total int, rows int64)) (RestoreReport, error) {
	records, err := r.cfg.SKUs.Records(ctx)
	if err != nil {
		return RestoreReport{}, fmt.Errorf("restore: %w", err)
	}
	if err := r.cfg.Redis.EnsureStreams(ctx, r.cfg.ConsumerGroup); err != nil {
		return RestoreReport{}, fmt.Errorf("restore: %w", err)
	}
	bySKU := make(map[string]SKURecord, len(records))
	for _, rec := range records {
		bySKU[rec.Definition.SKU().String()] = rec
	}

	var (
		mu     sync.Mutex
		report RestoreReport
		errs   []error
		rows   atomic.Int64
	)
	finish := func(sku string, n int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			report.Failed = append(report.Failed, sku)
			errs = append(errs, err)
		} else {
			report.SKUs++
			report.Rows += n
		}
		if progress != nil {
			progress(min(report.SKUs+len(report.Failed), len(records)), len(records), rows.Load())
		}
	}

	type job struct {
		img  RedisImage
		rows int64
	}
	jobs := make(chan job, r.cfg.Writers)
	var wg sync.WaitGroup
	for range r.cfg.Writers {
		wg.Go(func() {
			for j := range jobs {
				finish(j.img.State.SKU, j.rows, r.restore(ctx, j.img))
			}
		})
	}

	var (
		f    *folder
		seen = map[string]bool{}
	)
	// flush hands the SKU folded so far to the writers.
	flush := func() error {
		if f == nil {
			return nil
		}
		cur := f
		f = nil
		rec, ok := bySKU[cur.sku]
		switch {
		case cur.err != nil:
			finish(cur.sku, 0, foldError(cur.sku, cur.err))
		case !ok:
			finish(cur.sku, 0, fmt.Errorf("restore %s: %w: the ledger holds events of a sku that is not defined", cur.sku, domain.ErrCorruptLedger))
		case rec.Retired != nil:
			// Retired: Redis keeps only its tombstone.
			_, err := r.cfg.Redis.Entomb(ctx, rec.Definition.SKU())
			if err == nil {
				mu.Lock()
				report.Retired++
				mu.Unlock()
			}
			finish(cur.sku, 0, err)
		default:
			select {
			case jobs <- job{img: cur.image(rec), rows: cur.state.Seq}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	scanErr := r.cfg.Ledger.ScanAll(ctx, func(e domain.Event) error {
		rows.Add(1)
		if f != nil && f.sku == e.SKU {
			f.apply(e)
			return nil
		}
		if err := flush(); err != nil {
			return err
		}
		if seen[e.SKU] {
			return fmt.Errorf("ledger scan returned sku %s in two runs; it must group rows by sku", e.SKU)
		}
		seen[e.SKU] = true
		f = newFolder(e.SKU)
		f.apply(e)
		return nil
	})
	if scanErr == nil {
		scanErr = flush()
	}
	close(jobs)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if scanErr != nil {
		return report, fmt.Errorf("restore: read the ledger: %w", scanErr)
	}
	for _, rec := range records {
		if !seen[rec.Definition.SKU().String()] {
			report.Skipped++
		}
	}
	if progress != nil {
		progress(len(records), len(records), rows.Load())
	}
	return report, errors.Join(errs...)
}

func (r *Recovery) restore(ctx context.Context, img RedisImage) error {
	if err := r.cfg.Redis.Restore(ctx, img); err != nil {
		if errors.Is(err, ErrRedisAhead) {
			return fmt.Errorf("restore %s: %w: its newer events are still being projected; wait for the projector and run `invledger restore-redis --sku %s` again",
				img.State.SKU, err, img.State.SKU)
		}
		return fmt.Errorf("restore %s: %w", img.State.SKU, err)
	}
	r.cfg.Logger.Debug("sku restored from the ledger", "sku", img.State.SKU, "seq", img.State.Seq, "stock", img.State.Stock,
		"buyers", len(img.State.Buyers), "requests", len(img.State.Requests))
	return recordOperation(ctx, r.cfg.Operations, img.State.SKU, domain.ActionRestore,
		fmt.Sprintf("seq=%d stock=%d buyers=%d", img.State.Seq, img.State.Stock, len(img.State.Buyers)))
}

// folder folds one SKU's events as they stream in. The first error sticks:
// the SKU cannot be restored, but the scan goes on for the others.
type folder struct {
	sku       string
	state     *domain.SKUState
	stockedID string
	err       error
}

func newFolder(sku string) *folder { return &folder{sku: sku, state: domain.NewSKUState(sku)} }

func (f *folder) apply(e domain.Event) {
	if f.err != nil {
		return
	}
	if e.Type == domain.EventStocked {
		f.stockedID = e.ID
	}
	f.err = f.state.Apply(e)
}

func (f *folder) image(rec SKURecord) RedisImage {
	img := RedisImage{State: f.state, Limit: rec.Definition.PerUserLimit(), StockedEventID: f.stockedID, ClosedAt: rec.ClosedAt}
	if rec.Archive != nil {
		img.ArchivedAt = rec.Archive.ArchivedAt
	}
	return img
}

func foldError(sku string, err error) error {
	if errors.Is(err, domain.ErrCorruptLedger) {
		return fmt.Errorf("restore %s: %w (a missing seq means events are still being projected, or were lost with Redis: "+
			"run `invledger reconcile --sku %s`)", sku, err, sku)
	}
	return fmt.Errorf("restore %s: %w", sku, err)
}
