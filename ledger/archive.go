package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// ArchiverConfig wires an Archiver to its ports.
type ArchiverConfig struct {
	Ledger LedgerScanner
	SKUs   SKUCatalog
	// Inventory reads the SKU's live state; Redis closes it and drops its buyers.
	Inventory Inventory
	Redis     InventoryArchiver
	Archives  BuyerArchiveStore
	// Operations records who closed, archived and retired each SKU.
	Operations OperationLog
	// Reconcile reconciles one SKU without repairing it, and answers nil
	// only when the ledger and Redis agree: retirement's last check.
	Reconcile func(ctx context.Context, sku string) error
	// Attempts bounds how often ArchiveBuyers and RetireSKU start over when
	// a release moves the SKU during their checks. Default 5.
	Attempts int
	Logger   *slog.Logger
}

func (c *ArchiverConfig) setDefaults() {
	if c.Attempts == 0 {
		c.Attempts = 5
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every missing or invalid setting at once.
func (c ArchiverConfig) Validate() error {
	var errs []error
	for name, missing := range map[string]bool{
		"Ledger": c.Ledger == nil, "SKUs": c.SKUs == nil, "Inventory": c.Inventory == nil,
		"Redis": c.Redis == nil, "Archives": c.Archives == nil, "Operations": c.Operations == nil,
		"Reconcile": c.Reconcile == nil,
	} {
		if missing {
			errs = append(errs, fmt.Errorf("archiver: %s is required", name))
		}
	}
	if c.Attempts < 1 {
		errs = append(errs, errors.New("archiver: Attempts must be at least 1"))
	}
	return errors.Join(errs...)
}

// Archiver ends sales and moves their buyers from Redis to SQL once the
// ledger vouches for them, so that the buyers of finished sales do not grow
// Redis without bound.
type Archiver struct {
	cfg ArchiverConfig
}

// NewArchiver validates cfg and returns an Archiver.
func NewArchiver(cfg ArchiverConfig) (*Archiver, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Archiver{cfg: cfg}, nil
}

// CloseResult reports a close. AlreadyClosed is true when the SKU was closed
// before; ClosedAt is then the original closing time.
type CloseResult struct {
	SKU           string
	ClosedAt      time.Time
	AlreadyClosed bool
}

// CloseSKU ends a SKU's sale and appends its closed event (delta 0, the
// context's actor as who closed it): every later deduction is refused with
// domain.ErrClosed, while retries of earlier requests still get their
// receipts and releases still return stock. It is idempotent. The closing
// time is recorded in SQL too, so a Redis restore brings the SKU back
// closed. An undefined SKU is domain.ErrNotFound; one not in Redis is
// domain.ErrNotWarmed.
func (a *Archiver) CloseSKU(ctx context.Context, sku string) (CloseResult, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return CloseResult{}, err
	}
	if _, err := a.cfg.SKUs.Record(ctx, id); err != nil {
		return CloseResult{}, fmt.Errorf("close %s: %w", sku, err)
	}
	closedAt, already, err := a.cfg.Redis.CloseSKU(ctx, id, uuid.NewString(), ActorFrom(ctx))
	if err != nil {
		if errors.Is(err, domain.ErrNotWarmed) {
			return CloseResult{}, fmt.Errorf("close %s: %w: it is not on sale in Redis; if Redis lost it, run `invledger restore-redis --sku %s` first",
				sku, err, sku)
		}
		return CloseResult{}, fmt.Errorf("close %s: %w", sku, err)
	}
	// Redis first: its closing time is the one deductions obey. If this
	// write fails, running close again finds the SKU closed in Redis and
	// records the same time.
	stored, err := a.cfg.SKUs.RecordClosed(ctx, id, closedAt)
	if err != nil {
		return CloseResult{}, fmt.Errorf("close %s: closed in Redis, but recording it in PostgreSQL failed; run close again "+
			"so that a Redis restore keeps it closed: %w", sku, err)
	}
	a.cfg.Logger.Info("sku closed", "sku", sku, "closed_at", stored, "already_closed", already)
	if !already {
		if err := recordOperation(ctx, a.cfg.Operations, sku, domain.ActionClose, "closed_at="+stored.UTC().Format(time.RFC3339Nano)); err != nil {
			return CloseResult{}, err
		}
	}
	return CloseResult{SKU: sku, ClosedAt: stored, AlreadyClosed: already}, nil
}

// errLedgerGap stops a fold at the first seq the ledger does not hold yet.
var errLedgerGap = errors.New("gap in the ledger")

// ArchiveResult reports an archive of a SKU's buyers.
type ArchiveResult struct {
	SKU             string
	Seq             int64
	Buyers          int
	Units           int64
	ArchivedAt      time.Time
	AlreadyArchived bool
}

// ArchiveBuyers moves a closed SKU's buyers from Redis to SQL and deletes
// the Redis buyers hash. It refuses, changing nothing, while the SKU is open
// (ErrSKUOpen), while it has open holds (ErrHoldsOpen), while the ledger has not caught up with Redis
// (ErrLedgerBehind), and when Redis's buyers differ from the ledger's fold
// (ErrBuyersMismatch): the archive is only ever what the ledger vouches for.
// The receipts of past requests stay in Redis, so retries keep getting their
// original receipts and releases keep working. It is idempotent at a seq: a
// SKU that moved since its last archive (a release, or a restore after
// retirement and a release) is archived again, as a new version.
func (a *Archiver) ArchiveBuyers(ctx context.Context, sku string) (ArchiveResult, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return ArchiveResult{}, err
	}
	for attempt := 1; ; attempt++ {
		res, err := a.archiveOnce(ctx, id)
		if !errors.Is(err, ErrSeqMoved) || attempt == a.cfg.Attempts {
			return res, err
		}
		a.cfg.Logger.Debug("a release moved the sku while archiving; checking again", "sku", sku, "attempt", attempt)
	}
}

func (a *Archiver) archiveOnce(ctx context.Context, id domain.SKUID) (ArchiveResult, error) {
	sku := id.String()
	rec, err := a.cfg.SKUs.Record(ctx, id)
	if err != nil {
		return ArchiveResult{}, fmt.Errorf("archive %s: %w", sku, err)
	}
	already := func() (ArchiveResult, error) {
		return ArchiveResult{SKU: sku, Seq: rec.Archive.Seq, Buyers: rec.Archive.Buyers, Units: rec.Archive.Units,
			ArchivedAt: rec.Archive.ArchivedAt, AlreadyArchived: true}, nil
	}
	// Retirement needs a current archive, and nothing moves a retired SKU.
	if rec.Archive != nil && rec.Retired != nil {
		return already()
	}
	live, err := a.cfg.Inventory.State(ctx, id)
	if err == nil && rec.Archive != nil && rec.Archive.Seq == live.Seq {
		return already()
	}
	switch {
	case errors.Is(err, domain.ErrNotWarmed):
		return ArchiveResult{}, fmt.Errorf("archive %s: %w: Redis does not hold this sku; if it lost it, run `invledger restore-redis --sku %s` first",
			sku, err, sku)
	case err != nil:
		return ArchiveResult{}, fmt.Errorf("archive %s: %w", sku, err)
	case !live.Verified:
		return ArchiveResult{}, fmt.Errorf("archive %s: %w: Redis restarted and this sku is not verified against the ledger yet; try again shortly",
			sku, domain.ErrRecovering)
	case live.Status != domain.StatusClosed:
		return ArchiveResult{}, fmt.Errorf("archive %s: %w: buyers can change until the sale ends; close it first with `invledger sku close %s`",
			sku, ErrSKUOpen, sku)
	case live.Held > 0:
		// Closing leaves holds to be confirmed or to expire; their buyers
		// are final only then. A hold cannot begin on a closed SKU, and one
		// that ends moves the seq, which DropBuyers compares.
		return ArchiveResult{}, fmt.Errorf("archive %s: %w: %d units are held; wait until the holds are confirmed, cancelled or expire",
			sku, ErrHoldsOpen, live.Held)
	}

	// The projector may write a later seq before an earlier one (one
	// still pending on a consumer that died): the ledger up to the gap is
	// behind, not corrupt.
	fold := domain.NewSKUState(sku)
	err = a.cfg.Ledger.ScanSKU(ctx, id, func(e domain.Event) error {
		if e.Seq > fold.Seq+1 {
			return errLedgerGap
		}
		return fold.Apply(e)
	})
	if err != nil && !errors.Is(err, errLedgerGap) {
		return ArchiveResult{}, fmt.Errorf("archive %s: %w", sku, err)
	}
	if fold.Seq != live.Seq || fold.Stock != live.Stock {
		return ArchiveResult{}, fmt.Errorf("archive %s: %w: the ledger folds to stock %d at seq %d, Redis holds stock %d at seq %d; "+
			"wait for the projector to catch up, or run `invledger reconcile --sku %s`",
			sku, ErrLedgerBehind, fold.Stock, fold.Seq, live.Stock, live.Seq, sku)
	}
	buyers, dropped, err := a.cfg.Redis.Buyers(ctx, id)
	if err != nil {
		return ArchiveResult{}, fmt.Errorf("archive %s: %w", sku, err)
	}
	// The buyers hash is read in pages; a release during the read would
	// mix two states, so the seq must not have moved meanwhile.
	if again, err := a.cfg.Inventory.State(ctx, id); err != nil || again.Seq != live.Seq {
		return ArchiveResult{}, errors.Join(ErrSeqMoved, err)
	}
	// dropped: an earlier run verified and dropped the buyers but could not
	// commit its SQL record. The ledger fold, checked above against Redis
	// at this seq, is still the complete record, so it is archived now.
	if !dropped {
		if diff := diffBuyers(buyers, fold.Buyers); diff != "" {
			return ArchiveResult{}, fmt.Errorf("archive %s: %w at seq %d: %s; run `invledger reconcile --sku %s --repair`",
				sku, ErrBuyersMismatch, live.Seq, diff, sku)
		}
	}
	archive := BuyerArchive{SKU: sku, Seq: live.Seq, Buyers: fold.Buyers}
	for _, q := range fold.Buyers {
		archive.Units += q
	}
	sum, recorded, err := a.cfg.Archives.RecordArchive(ctx, archive, func(ctx context.Context) error {
		return a.cfg.Redis.DropBuyers(ctx, id, live.Seq)
	})
	if err != nil {
		if errors.Is(err, ErrSeqMoved) {
			return ArchiveResult{}, err
		}
		return ArchiveResult{}, fmt.Errorf("archive %s: %w", sku, err)
	}
	if recorded {
		a.cfg.Logger.Info("buyers archived to SQL and dropped from Redis", "sku", sku, "seq", sum.Seq, "buyers", sum.Buyers, "units", sum.Units)
		if err := recordOperation(ctx, a.cfg.Operations, sku, domain.ActionArchive,
			fmt.Sprintf("seq=%d buyers=%d units=%d", sum.Seq, sum.Buyers, sum.Units)); err != nil {
			return ArchiveResult{}, err
		}
	}
	return ArchiveResult{SKU: sku, Seq: sum.Seq, Buyers: sum.Buyers, Units: sum.Units, ArchivedAt: sum.ArchivedAt, AlreadyArchived: !recorded}, nil
}

// ArchiveClosed archives the buyers of every SKU closed at least olderThan
// ago and not archived yet. SKUs that cannot be archived now are skipped and
// their errors joined; ErrLedgerBehind and domain.ErrRecovering among them
// are transient, and the next call tries those SKUs again.
func (a *Archiver) ArchiveClosed(ctx context.Context, olderThan time.Duration) ([]ArchiveResult, error) {
	ctx = WithDefaultActor(ctx, "system:archiver")
	skus, err := a.cfg.SKUs.ClosedUnarchived(ctx, olderThan)
	if err != nil {
		return nil, fmt.Errorf("archive closed skus: %w", err)
	}
	return eachSKU(ctx, skus, a.ArchiveBuyers)
}

// eachSKU runs op on every SKU of skus, skipping those it fails on and
// joining their errors, until ctx ends.
func eachSKU[R any](ctx context.Context, skus []domain.SKUID, op func(context.Context, string) (R, error)) ([]R, error) {
	out := make([]R, 0, len(skus))
	var errs []error
	for _, sku := range skus {
		if err := ctx.Err(); err != nil {
			return out, errors.Join(append(errs, err)...)
		}
		res, err := op(ctx, sku.String())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

// diffBuyers describes how redis differs from ledger, naming at most a few
// users, or returns "" when they are equal.
func diffBuyers(redis, ledger map[string]int64) string {
	type mismatch struct {
		user          string
		redis, ledger int64
	}
	var diffs []mismatch
	for u := range redis {
		if redis[u] != ledger[u] {
			diffs = append(diffs, mismatch{u, redis[u], ledger[u]})
		}
	}
	for u, q := range ledger {
		if _, ok := redis[u]; !ok {
			diffs = append(diffs, mismatch{u, 0, q})
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	slices.SortFunc(diffs, func(x, y mismatch) int { return cmp.Compare(x.user, y.user) })
	const shown = 5
	parts := make([]string, 0, shown)
	for _, d := range diffs[:min(len(diffs), shown)] {
		parts = append(parts, fmt.Sprintf("user %q holds %d in Redis, %d in the ledger", d.user, d.redis, d.ledger))
	}
	if len(diffs) > shown {
		parts = append(parts, fmt.Sprintf("and %d more", len(diffs)-shown))
	}
	return fmt.Sprintf("%d users differ: %s", len(diffs), strings.Join(parts, "; "))
}
