package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/invledger/invledger/domain"
)

// Refusals of the recovery and archive operations. Each one also matches
// domain.ErrConflict, so adapters that know only the domain's sentinels
// still answer them as a conflict (HTTP 409, CLI exit status 2).
var (
	// ErrRedisAhead means Redis holds a SKU at a higher seq than its ledger:
	// events are still on their way to the ledger, and restoring now would
	// drop them. Wait for the projector, then retry.
	ErrRedisAhead = fmt.Errorf("%w: redis is ahead of the ledger", domain.ErrConflict)
	// ErrLedgerBehind means the ledger has not caught up with Redis yet, so
	// it cannot vouch for Redis's buyers. Wait for the projector or reconcile.
	ErrLedgerBehind = fmt.Errorf("%w: the ledger has not caught up with redis", domain.ErrConflict)
	// ErrSKUOpen means the operation needs a closed sale.
	ErrSKUOpen = fmt.Errorf("%w: the sku is still open", domain.ErrConflict)
	// ErrHoldsOpen means a closed SKU still has open holds: they count
	// against their buyers' limits until they are confirmed, cancelled or
	// expire, so its buyers are not final yet.
	ErrHoldsOpen = fmt.Errorf("%w: the sku has open holds", domain.ErrConflict)
	// ErrBuyersMismatch means Redis's buyers differ from the ledger's fold at
	// the same seq: drift that reconciliation must repair first.
	ErrBuyersMismatch = fmt.Errorf("%w: redis buyers differ from the ledger", domain.ErrConflict)
	// ErrNotArchived means retirement needs the buyers archived to SQL at
	// the SKU's current seq first.
	ErrNotArchived = fmt.Errorf("%w: the buyers are not archived at the current seq", domain.ErrConflict)
	// ErrDrift means a reconciliation of the SKU found the ledger and Redis
	// apart, so retirement would lose what only Redis holds.
	ErrDrift = fmt.Errorf("%w: the ledger and redis differ", domain.ErrConflict)
)

// ErrSeqMoved is returned by InventoryArchiver.DropBuyers when the SKU's seq
// is no longer the one checked: a release slipped in between the check and
// the write that depends on it, so the caller checks again.
var ErrSeqMoved = errors.New("the sku's seq moved during the operation")

// LedgerScanner streams the append-only ledger in seq order without loading
// it whole, so a SKU's or the whole ledger's fold runs in bounded memory.
type LedgerScanner interface {
	// ScanSKU calls fn with each event of sku, in seq order.
	ScanSKU(ctx context.Context, sku domain.SKUID, fn func(domain.Event) error) error
	// ScanAll calls fn with every event, grouped by SKU and in seq order
	// within each SKU. An error from fn stops the scan and is returned.
	ScanAll(ctx context.Context, fn func(domain.Event) error) error
}

// ArchiveSummary describes a SKU's buyers archive in SQL.
type ArchiveSummary struct {
	// Seq is the SKU's seq when its buyers were archived.
	Seq int64
	// Buyers is how many users held units; Units is how many they held.
	Buyers     int
	Units      int64
	ArchivedAt time.Time
}

// SKURecord is a SKU's definition with its lifecycle as SQL records it.
type SKURecord struct {
	Definition domain.SKUDefinition
	// ClosedAt is when the sale was closed; zero while it is open.
	ClosedAt time.Time
	// Archive is the latest archive of the buyers to SQL, nil before the
	// first one. It is current while its Seq is the SKU's seq.
	Archive *ArchiveSummary
	// Retired is set while the SKU is retired: gone from Redis, answered
	// for by the ledger. A restore clears it.
	Retired *Retirement
	// ReopenedAt is when a restore last brought the SKU back from
	// retirement; zero if it never was.
	ReopenedAt time.Time
}

// Retirement is when a SKU was retired, at which seq.
type Retirement struct {
	Seq int64
	At  time.Time
}

// SKUCatalog reads SKU definitions together with their lifecycle, and
// records lifecycle changes. Recording a change twice keeps the first.
type SKUCatalog interface {
	Record(ctx context.Context, sku domain.SKUID) (SKURecord, error)
	// Records lists every SKU.
	Records(ctx context.Context) ([]SKURecord, error)
	// RecordClosed stores at as the SKU's closing time unless one is
	// stored already, and returns the stored one.
	RecordClosed(ctx context.Context, sku domain.SKUID, at time.Time) (time.Time, error)
	// ClosedUnarchived lists the SKUs closed at least olderThan ago whose
	// buyers are not archived yet.
	ClosedUnarchived(ctx context.Context, olderThan time.Duration) ([]domain.SKUID, error)
	// RecordRetired marks the SKU retired at seq unless it is retired
	// already, and returns the stored retirement.
	RecordRetired(ctx context.Context, sku domain.SKUID, r Retirement) (Retirement, error)
	// RecordReopened clears the SKU's retirement, if any, and notes when.
	RecordReopened(ctx context.Context, sku domain.SKUID) error
	// ClosedUnretired lists the SKUs closed, and reopened if ever, at least
	// olderThan ago that are not retired.
	ClosedUnretired(ctx context.Context, olderThan time.Duration) ([]domain.SKUID, error)
}

// BalanceRecomputer recomputes the balances projection from the ledger, in
// the store that holds both.
type BalanceRecomputer interface {
	// RebuildBalance sets sku's balances row to the ledger's sum and last
	// seq, safely beside a running projector. corrected reports a change.
	RebuildBalance(ctx context.Context, sku domain.SKUID) (corrected bool, err error)
	// BalanceSKUs lists every SKU that has ledger rows or a balances row.
	BalanceSKUs(ctx context.Context) ([]string, error)
}

// RedisImage is everything Redis must hold for one SKU, as its ledger fold
// and its SKU record determine it.
type RedisImage struct {
	State          *domain.SKUState
	Limit          int64
	StockedEventID string
	// ClosedAt is set when the sale was closed: the SKU comes back closed.
	ClosedAt time.Time
	// ArchivedAt is set when the buyers were archived to SQL: they are not
	// written back, which would undo the archive.
	ArchivedAt time.Time
}

// InventoryRestorer writes restored state into Redis.
type InventoryRestorer interface {
	// EnsureStreams creates every partition stream and its consumer group
	// where they are missing.
	EnsureStreams(ctx context.Context, group string) error
	// Restore replaces the SKU's Redis state with img. It fences the SKU
	// first, so purchases are refused as recovering until the state is
	// complete, and refuses with ErrRedisAhead, writing nothing, when Redis
	// holds the SKU at a seq beyond img's.
	Restore(ctx context.Context, img RedisImage) error
	// Entomb marks a retired SKU as retired in Redis again, as after Redis
	// lost its data; present is true, and nothing changes, when Redis holds
	// the SKU.
	Entomb(ctx context.Context, sku domain.SKUID) (present bool, err error)
}

// InventoryArchiver closes sales and drops their buyers from Redis.
type InventoryArchiver interface {
	// CloseSKU marks the SKU closed, appending its closed event (eventID,
	// by actor), and returns when it was closed; already is true when it
	// was closed before, and nothing is appended then. Unknown SKUs are
	// domain.ErrNotWarmed.
	CloseSKU(ctx context.Context, sku domain.SKUID, eventID, actor string) (closedAt time.Time, already bool, err error)
	// Buyers reads the SKU's buyers' counts. archived is true when they
	// were already dropped by DropBuyers.
	Buyers(ctx context.Context, sku domain.SKUID) (buyers map[string]int64, archived bool, err error)
	// DropBuyers deletes the buyers' counts of a closed SKU and marks it
	// archived, provided its seq is still seq (else ErrSeqMoved). Dropping
	// an archived SKU's buyers again succeeds without writing.
	DropBuyers(ctx context.Context, sku domain.SKUID, seq int64) error
	// Retire removes every key of a closed SKU whose buyers were dropped,
	// and tombstones it, provided its seq is still seq (else ErrSeqMoved)
	// and it is verified under the current Redis run (else
	// domain.ErrRecovering). already is true when it was retired before.
	// An open SKU is ErrSKUOpen, one with its buyers in Redis
	// ErrNotArchived, an unknown one domain.ErrNotWarmed; all write nothing.
	Retire(ctx context.Context, sku domain.SKUID, seq int64) (already bool, err error)
}

// BuyerArchive is the buyers of a SKU as they are archived to SQL.
type BuyerArchive struct {
	SKU    string
	Seq    int64
	Buyers map[string]int64
	Units  int64
}

// BuyerArchiveStore keeps archived buyers in SQL.
type BuyerArchiveStore interface {
	// RecordArchive stores a in a transaction and calls drop before
	// committing it, so an archive is never committed unless Redis dropped
	// the buyers. It returns the stored archive; recorded is false, and drop
	// is not called, when the SKU was archived already at a.Seq. Every
	// other archive of the SKU is kept as an earlier version.
	RecordArchive(ctx context.Context, a BuyerArchive, drop func(context.Context) error) (stored ArchiveSummary, recorded bool, err error)
}
