package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// RecordKind names what Redis keeps that a script could not read.
type RecordKind string

const (
	// RecordReceipt is the receipt of a request id in the SKU's requests
	// hash: a deduction's outcome, or the marker of the hold it reserved.
	RecordReceipt RecordKind = "receipt"
	// RecordHold is a hold's record in the SKU hash.
	RecordHold RecordKind = "hold"
	// RecordSKU is the state of one SKU as a whole: a live field of its
	// hash (stock, seq, limit, status, the open-hold counts) or a buyer's
	// count that does not parse, or one of its keys (hash, buyers,
	// requests, refusal counters) holding another type. Every call on the
	// SKU answers unavailable until the SKU is restored from the ledger.
	RecordSKU RecordKind = "sku"
	// RecordPartitionKey is a key that all the SKUs of a partition share
	// (its stream, hold-expiry set or retired set) holding another type.
	// It is never rebuilt automatically: the stream's unprojected entries
	// are in no ledger yet, so an operator decides (docs/operations.md).
	RecordPartitionKey RecordKind = "partition_key"
)

// RecordKinds are the kinds of record, for metrics that start every
// series at zero.
var RecordKinds = []RecordKind{RecordReceipt, RecordHold, RecordSKU, RecordPartitionKey}

// CorruptRecord names something Redis holds that does not parse: every
// script that meets it fails without writing, so what it holds cannot be
// read until it is rebuilt from the ledger.
type CorruptRecord struct {
	SKU  string
	Kind RecordKind
	// RequestID is the request the record answers: always known for a
	// receipt; for a hold record, known when a reserve met it, and filled
	// in from the ledger by the repair otherwise.
	RequestID string
	// HoldID is set for a hold record.
	HoldID string
	// Key is the Redis key of a RecordPartitionKey, and of a RecordSKU
	// when the fault was found in one key.
	Key string
	// Problem says what was read, for a RecordSKU and a
	// RecordPartitionKey: "stock is \"abc\"", "a string, not a hash".
	Problem string
}

// String names the record for logs and errors.
func (c CorruptRecord) String() string {
	switch c.Kind {
	case RecordHold:
		return fmt.Sprintf("hold record %s of sku %s (request_id %q)", c.HoldID, c.SKU, c.RequestID)
	case RecordSKU:
		return fmt.Sprintf("state of sku %s%s", c.SKU, c.where())
	case RecordPartitionKey:
		return fmt.Sprintf("partition key %s%s", c.Key, c.where())
	}
	return fmt.Sprintf("receipt of request_id %q of sku %s", c.RequestID, c.SKU)
}

func (c CorruptRecord) where() string {
	switch {
	case c.Kind == RecordPartitionKey && c.Problem != "":
		return " (" + c.Problem + ")"
	case c.Key != "" && c.Problem != "":
		return " (" + c.Key + ": " + c.Problem + ")"
	case c.Key != "":
		return " (" + c.Key + ")"
	case c.Problem != "":
		return " (" + c.Problem + ")"
	}
	return ""
}

// CorruptRecordError is the error of an operation that met a corrupt
// record. It matches domain.ErrCorruptRecord, so the caller retries with
// the same request id, and the script's own error, which says what it
// read.
type CorruptRecordError struct {
	Record CorruptRecord
	Err    error
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("%s is corrupt: %v", e.Record, e.Err)
}

// Unwrap exposes domain.ErrCorruptRecord and the script's error.
func (e *CorruptRecordError) Unwrap() []error { return []error{domain.ErrCorruptRecord, e.Err} }

// RecordProbe is what Redis holds for a record, read at one instant with
// its SKU's seq.
type RecordProbe struct {
	// Corrupt is true when the record is present and does not parse as
	// the scripts read it; Value is then its raw value, and Seq the SKU's
	// seq at that instant: every event that wrote the record is at or
	// below it, since nothing can change a record that does not parse.
	Corrupt bool
	Value   string
	Seq     int64
}

// RecordRewriter reads and rewrites single records of a SKU in Redis.
type RecordRewriter interface {
	// ProbeRecord reads rec with its SKU's seq. A SKU Redis does not hold
	// is domain.ErrNotWarmed.
	ProbeRecord(ctx context.Context, rec CorruptRecord) (RecordProbe, error)
	// RewriteRecord replaces rec, provided it still holds the corrupt value
	// seen (else ErrSeqMoved, writing nothing), with what state, the
	// ledger's fold of its SKU, holds for it; a record the fold has none
	// of is deleted. A SKU not verified under the current Redis run is
	// domain.ErrRecovering: its restore rewrites every record.
	RewriteRecord(ctx context.Context, rec CorruptRecord, seen string, state *domain.SKUState) error
}

// errFoldedEnough stops a ledger scan once it has folded what a record
// repair needs.
var errFoldedEnough = errors.New("folded up to the seq asked")

// RepairRecord rebuilds one corrupt record of Redis from the ledger: the
// repair of a receipt or hold record that a script met and could not read.
// It folds the SKU's ledger up to the seq Redis held when the record was
// read corrupt, which covers every event that wrote the record, and
// rewrites that one record, never the SKU, so purchases go on meanwhile.
// It returns rec with its request id filled in from the ledger; repaired
// is false when the record is sound (already repaired, or never corrupt).
// While the ledger lacks an event up to that seq the answer is
// ErrLedgerBehind and nothing is written: the caller retries once the
// projector has caught up.
func (r *Recovery) RepairRecord(ctx context.Context, rec CorruptRecord) (_ CorruptRecord, repaired bool, err error) {
	id, err := domain.NewSKUID(rec.SKU)
	if err != nil {
		return rec, false, err
	}
	probe, err := r.cfg.Records.ProbeRecord(ctx, rec)
	if err != nil || !probe.Corrupt {
		return rec, false, err
	}
	f := newFolder(rec.SKU)
	err = r.cfg.Ledger.ScanSKU(ctx, id, func(e domain.Event) error {
		// Past the record's seq nothing is needed; past a gap the events
		// are still being projected.
		if e.Seq > probe.Seq || e.Seq != f.state.Seq+1 {
			return errFoldedEnough
		}
		f.apply(e)
		return f.err
	})
	if err != nil && !errors.Is(err, errFoldedEnough) {
		return rec, false, foldError(rec.SKU, err)
	}
	if f.state.Seq < probe.Seq {
		return rec, false, fmt.Errorf("repair the %s: %w: it holds every event up to seq %d, the record needs %d",
			rec, ErrLedgerBehind, f.state.Seq, probe.Seq)
	}
	if rec.Kind == RecordHold && rec.RequestID == "" {
		rec.RequestID = f.state.Holds[rec.HoldID].RequestID
	}
	if err := r.cfg.Records.RewriteRecord(ctx, rec, probe.Value, f.state); err != nil {
		return rec, false, fmt.Errorf("repair the %s: %w", rec, err)
	}
	return rec, true, nil
}
