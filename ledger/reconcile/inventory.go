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
	// parse, and a buyer's count that does not (a ledger.RecordSKU). It
	// reads every record of the SKU, so only a run that names the SKU
	// asks.
	CorruptRecords(ctx context.Context, sku domain.SKUID) ([]ledger.CorruptRecord, error)
	// Quarantine looks at sku's whole state as the scripts read it (the
	// types of its keys, its live fields, its buyers' counts) and, when
	// it does not read, takes the SKU out of sale until a restore from
	// the ledger stamps it. A fault only in the SKU's refusal counters,
	// console figures the ledger does not hold, is cleared on the spot.
	Quarantine(ctx context.Context, sku domain.SKUID) (StateFault, error)
}

// StateFault is what Inventory.Quarantine found wrong with one SKU's
// state. The zero value is a state that reads.
type StateFault struct {
	// Key and Problem say where and what: "inv:{p03}:sku:c3", "stock is
	// \"abc\"".
	Key, Problem string
	// Restore is true when the SKU must be restored from the ledger; false
	// when the fault is gone already (refusal counters, cleared).
	Restore bool
}

// Found reports whether anything did not read.
func (f StateFault) Found() bool { return f.Key != "" || f.Problem != "" }

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
	// Corrupt, when set, is the SKU's state that does not read (a key of
	// another type, a live field that does not parse): the figures above
	// are unknown, and the SKU is a corrupt_record finding, restored from
	// the ledger.
	Corrupt *StateFault
}

// Snapshot is the live state of some SKUs and their events in flight.
// Entries that cannot be decoded are left out: the projector sends them to
// dead_letters, which alerts.
type Snapshot struct {
	SKUs     map[domain.SKUID]LiveSKU
	InFlight []domain.Event
	// Unreachable are SKUs whose Redis Cluster master did not answer, or
	// whose partition has a key of another type (CorruptKeys): they are
	// neither checked nor reported, and the other SKUs are.
	Unreachable []domain.SKUID
	// CorruptKeys are the partition keys (ledger.RecordPartitionKey) that
	// hold another type than the scripts write.
	CorruptKeys []ledger.CorruptRecord
}
