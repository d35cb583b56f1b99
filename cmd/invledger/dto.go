package main

import (
	"time"

	"github.com/invledger/invledger/ledger"
)

// The JSON shapes that only the CLI prints. Each is mapped field by field
// from its ledger type, so renaming a Go field cannot change the output
// that scripts parse. A nil slice stays nil and prints as null, as the
// ledger types printed it.

// chainReportJSON is what `audit verify --format json` prints.
type chainReportJSON struct {
	SKUs   int               `json:"skus"`
	Events int64             `json:"events"`
	Broken []brokenChainJSON `json:"broken"`
}

type brokenChainJSON struct {
	SKU    string `json:"sku"`
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
}

func newChainReportJSON(r ledger.ChainReport) chainReportJSON {
	return chainReportJSON{SKUs: r.SKUs, Events: r.Events, Broken: mapSlice(r.Broken, func(b ledger.BrokenChain) brokenChainJSON {
		return brokenChainJSON{SKU: b.SKU, Seq: b.Seq, Reason: b.Reason}
	})}
}

// closeResultJSON is what `sku close` prints.
type closeResultJSON struct {
	SKU           string    `json:"sku"`
	ClosedAt      time.Time `json:"closed_at"`
	AlreadyClosed bool      `json:"already_closed"`
}

func newCloseResultJSON(r ledger.CloseResult) closeResultJSON {
	return closeResultJSON{SKU: r.SKU, ClosedAt: r.ClosedAt, AlreadyClosed: r.AlreadyClosed}
}

// archiveResultJSON is what `archive-buyers` prints per SKU.
type archiveResultJSON struct {
	SKU             string    `json:"sku"`
	Seq             int64     `json:"seq"`
	Buyers          int       `json:"buyers"`
	Units           int64     `json:"units"`
	ArchivedAt      time.Time `json:"archived_at"`
	AlreadyArchived bool      `json:"already_archived"`
}

func newArchiveResultJSON(r ledger.ArchiveResult) archiveResultJSON {
	return archiveResultJSON{SKU: r.SKU, Seq: r.Seq, Buyers: r.Buyers, Units: r.Units, ArchivedAt: r.ArchivedAt,
		AlreadyArchived: r.AlreadyArchived}
}

// archivedJSON is what `archive-buyers --closed-for` prints.
type archivedJSON struct {
	Archived []archiveResultJSON `json:"archived"`
}

// rebuildReportJSON is what `rebuild-projections` prints.
type rebuildReportJSON struct {
	SKUs      int      `json:"skus"`
	Corrected []string `json:"corrected"`
	Failed    []string `json:"failed,omitempty"`
}

func newRebuildReportJSON(r ledger.RebuildReport) rebuildReportJSON {
	return rebuildReportJSON{SKUs: r.SKUs, Corrected: r.Corrected, Failed: r.Failed}
}

// restoreReportJSON is what `restore-redis --all` prints.
type restoreReportJSON struct {
	SKUs    int      `json:"skus"`
	Rows    int64    `json:"rows"`
	Skipped int      `json:"skipped"`
	Failed  []string `json:"failed,omitempty"`
}

func newRestoreReportJSON(r ledger.RestoreReport) restoreReportJSON {
	return restoreReportJSON{SKUs: r.SKUs, Rows: r.Rows, Skipped: r.Skipped, Failed: r.Failed}
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
