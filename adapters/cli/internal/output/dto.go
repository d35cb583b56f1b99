package output

import (
	"time"

	"github.com/invledger/invledger/ledger"
)

// The JSON shapes that only the CLI prints. Each is mapped field by field
// from its ledger type, so renaming a Go field cannot change the output
// that scripts parse. A nil slice stays nil and prints as null, as the
// ledger types printed it.

// ChainReportJSON is what `audit verify --format json` prints.
type ChainReportJSON struct {
	SKUs   int               `json:"skus"`
	Events int64             `json:"events"`
	Broken []BrokenChainJSON `json:"broken"`
	// Sealed and Unsealed say how far the sealer has linked the rows.
	Sealed   int64               `json:"sealed,omitempty"`
	Unsealed []UnsealedChainJSON `json:"unsealed,omitempty"`
	// What was checked: keyed and unkeyed rows, by key id, the
	// checkpoints, and whether anything in the ledger is keyed.
	Keyed       int64            `json:"keyed"`
	KeyIDs      map[string]int64 `json:"key_ids"`
	Unkeyed     int64            `json:"unkeyed"`
	Checkpoints int64            `json:"checkpoints"`
	// NewestCheckpoint is the reference to keep for --since-checkpoint:
	// absent unless the ledger is intact and its newest checkpoint verified.
	NewestCheckpoint *CheckpointJSON `json:"newest_checkpoint,omitempty"`
	BrokenCheckpoint string          `json:"broken_checkpoint,omitempty"`
	KeysGiven        []string        `json:"seal_keys_given"`
	Unprotected      bool            `json:"unprotected"`
	Unchecked        []string        `json:"unchecked,omitempty"`
	// Rollback says the --since-checkpoint checkpoint is gone or differs.
	Rollback string `json:"rollback,omitempty"`
	// RetiredRows counts, by key id, rows sealed under a retired key: not
	// checked.
	RetiredRows        map[string]int64 `json:"retired_rows,omitempty"`
	RetiredCheckpoints int64            `json:"retired_checkpoints,omitempty"`
	UnknownKeyIDs      []string         `json:"unknown_key_ids,omitempty"`
}

// CheckpointJSON names a keyed checkpoint of the chain heads.
type CheckpointJSON struct {
	N     int64     `json:"n"`
	At    time.Time `json:"at"`
	KeyID string    `json:"key_id"`
	MAC   string    `json:"mac"`
}

type UnsealedChainJSON struct {
	SKU      string `json:"sku"`
	SealedTo int64  `json:"sealed_to"`
	Rows     int64  `json:"rows"`
	Missing  bool   `json:"next_seq_missing"`
}

type BrokenChainJSON struct {
	SKU    string `json:"sku"`
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

// NewChainReportJSON maps r field by field.
func NewChainReportJSON(r ledger.ChainReport) ChainReportJSON {
	j := ChainReportJSON{SKUs: r.SKUs, Events: r.Events, Broken: mapSlice(r.Broken, func(b ledger.BrokenChain) BrokenChainJSON {
		return BrokenChainJSON{SKU: b.SKU, Seq: b.Seq, Reason: b.Reason}
	}), Sealed: r.Sealed, Unsealed: mapSlice(r.Unsealed, func(u ledger.UnsealedChain) UnsealedChainJSON {
		return UnsealedChainJSON{SKU: u.SKU, SealedTo: u.SealedTo, Rows: u.Rows, Missing: u.Missing}
	}), Keyed: r.Keyed, KeyIDs: r.KeyIDs, Unkeyed: r.Unkeyed, Checkpoints: r.Checkpoints, BrokenCheckpoint: r.BrokenCheckpoint,
		KeysGiven: r.KeysGiven, Unprotected: r.Unprotected(), Unchecked: r.Unchecked, Rollback: r.Rollback,
		RetiredRows: r.Retired, RetiredCheckpoints: r.RetiredCheckpoints, UnknownKeyIDs: r.UnknownKeyIDs}
	if c, ok := r.Reference(); ok {
		j.NewestCheckpoint = &CheckpointJSON{N: c.N, At: c.At, KeyID: c.KeyID, MAC: c.MAC}
	}
	return j
}

// CloseResultJSON is what `sku close` prints.
type CloseResultJSON struct {
	SKU           string    `json:"sku"`
	ClosedAt      time.Time `json:"closed_at"`
	AlreadyClosed bool      `json:"already_closed"`
}

// NewCloseResultJSON maps r field by field.
func NewCloseResultJSON(r ledger.CloseResult) CloseResultJSON {
	return CloseResultJSON{SKU: r.SKU, ClosedAt: r.ClosedAt, AlreadyClosed: r.AlreadyClosed}
}

// RetireResultJSON is what `sku retire` prints.
type RetireResultJSON struct {
	SKU            string    `json:"sku"`
	Seq            int64     `json:"seq"`
	RetiredAt      time.Time `json:"retired_at"`
	AlreadyRetired bool      `json:"already_retired"`
}

// NewRetireResultJSON maps r field by field.
func NewRetireResultJSON(r ledger.RetireResult) RetireResultJSON {
	return RetireResultJSON{SKU: r.SKU, Seq: r.Seq, RetiredAt: r.RetiredAt, AlreadyRetired: r.AlreadyRetired}
}

// ArchiveResultJSON is what `archive-buyers` prints per SKU.
type ArchiveResultJSON struct {
	SKU             string    `json:"sku"`
	Seq             int64     `json:"seq"`
	Buyers          int       `json:"buyers"`
	Units           int64     `json:"units"`
	ArchivedAt      time.Time `json:"archived_at"`
	AlreadyArchived bool      `json:"already_archived"`
}

// NewArchiveResultJSON is what `archive-buyers` prints per SKU.
func NewArchiveResultJSON(r ledger.ArchiveResult) ArchiveResultJSON {
	return ArchiveResultJSON{SKU: r.SKU, Seq: r.Seq, Buyers: r.Buyers, Units: r.Units, ArchivedAt: r.ArchivedAt,
		AlreadyArchived: r.AlreadyArchived}
}

// ArchivedJSON is what `archive-buyers --closed-for` prints.
type ArchivedJSON struct {
	Archived []ArchiveResultJSON `json:"archived"`
}

// NewArchivedJSON maps the results of one archive-buyers --closed-for run.
func NewArchivedJSON(results []ledger.ArchiveResult) ArchivedJSON {
	return ArchivedJSON{Archived: mapSlice(results, NewArchiveResultJSON)}
}

// RebuildReportJSON is what `rebuild-projections` prints.
type RebuildReportJSON struct {
	SKUs      int      `json:"skus"`
	Corrected []string `json:"corrected"`
	Failed    []string `json:"failed,omitempty"`
}

// NewRebuildReportJSON maps r field by field.
func NewRebuildReportJSON(r ledger.RebuildReport) RebuildReportJSON {
	return RebuildReportJSON{SKUs: r.SKUs, Corrected: r.Corrected, Failed: r.Failed}
}

// RestoreReportJSON is what `restore-redis --all` prints.
type RestoreReportJSON struct {
	SKUs    int      `json:"skus"`
	Rows    int64    `json:"rows"`
	Skipped int      `json:"skipped"`
	Retired int      `json:"retired,omitempty"`
	Failed  []string `json:"failed,omitempty"`
}

// NewRestoreReportJSON maps r field by field.
func NewRestoreReportJSON(r ledger.RestoreReport) RestoreReportJSON {
	return RestoreReportJSON{SKUs: r.SKUs, Rows: r.Rows, Skipped: r.Skipped, Retired: r.Retired, Failed: r.Failed}
}

// mapSlice maps in with f, keeping a nil slice nil.
func mapSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}
