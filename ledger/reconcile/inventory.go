package reconcile

import (
	"context"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// Inventory is the live side as the reconciler reads and repairs it.
type Inventory interface {
	// Snapshot reads the live figures of skus together with the events in
	// flight for them: appended to the stream but possibly not yet in the
	// ledger. Each SKU's figures and its in-flight events are read at one
	// instant, so every event missing from InFlight is in the ledger already.
	Snapshot(ctx context.Context, skus []domain.SKUID) (Snapshot, error)
	// StreamEvents returns the events of sku with one of seqs that the
	// stream still holds, for re-projecting ledger gaps.
	StreamEvents(ctx context.Context, sku domain.SKUID, seqs []int64) ([]domain.Event, error)
	// StampMany marks skus verified under the current Redis run, each
	// provided its seq is still seqs[i]; stamped[i] is false when it moved.
	StampMany(ctx context.Context, skus []domain.SKUID, seqs []int64) (stamped []bool, err error)
	// Fence takes sku out of sale if its seq is still seq.
	Fence(ctx context.Context, sku domain.SKUID, seq int64) (fenced bool, err error)
	// Correct sets sku's stock and stamps it verified if its seq is still seq.
	Correct(ctx context.Context, sku domain.SKUID, seq, stock int64) (corrected bool, err error)
	// CorruptRecords finds sku's receipts and hold records that do not
	// parse. It reads every record of the SKU, so only a run that names
	// the SKU asks.
	CorruptRecords(ctx context.Context, sku domain.SKUID) ([]ledger.CorruptRecord, error)
}

// LiveSKU is one SKU's live state within a Snapshot.
type LiveSKU struct {
	// Present is false when the live side holds nothing for the SKU.
	Present bool
	// Retired is true when the SKU is absent because it was retired: the
	// ledger answers for it, and nothing is missing.
	Retired bool
	Stock   int64
	Seq     int64
	Status  string
	// Verified is true when the SKU was verified under the Redis run serving it.
	Verified bool
	// Buyers is the number of users holding units.
	Buyers int64
	// Archived is true once the buyers were archived to SQL.
	Archived bool
	// Receipts is the number of request ids Redis holds receipts for.
	Receipts int64
	// Held is the units of the SKU's open holds, OpenHolds their number.
	Held      int64
	OpenHolds int64
	// OpenHoldIDs are the ids of the SKU's open holds, read with the rest
	// of the snapshot when HoldIDsRead is true. A source reads them up to a
	// bound; beyond it the set is not compared, only the counts.
	OpenHoldIDs []string
	HoldIDsRead bool
	// TailTruncated is true when the SKU's partition had more events in
	// flight than one snapshot reads: InFlight then lacks some of this
	// SKU's events, so its figures cannot be compared exactly.
	TailTruncated bool
}

// Snapshot is the live state of some SKUs and their events in flight.
// Entries that cannot be decoded are left out: the projector sends them to
// dead_letters, which alerts.
type Snapshot struct {
	SKUs     map[domain.SKUID]LiveSKU
	InFlight []domain.Event
	// Unreachable are SKUs whose Redis Cluster master did not answer: they
	// are neither checked nor reported, and the other masters' SKUs are.
	Unreachable []domain.SKUID
}
