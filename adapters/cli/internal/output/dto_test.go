package output

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// TestPrintedJSONIsAsBefore pins what the recovery and verify commands
// print, byte for byte, as the ledger types encoded it before they lost
// their json tags: full, zero, with empty and with nil slices. printJSON
// only indents it. verify's report has since gained, after the fields it
// had, what it checked: keyed and unkeyed rows, key ids, checkpoints.
func TestPrintedJSONIsAsBefore(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123000000, time.UTC)
	for _, tc := range []struct {
		what string
		v    any
		want string
	}{
		{"chain report", NewChainReportJSON(ledger.ChainReport{SKUs: 2, Events: 9, Broken: []ledger.BrokenChain{{SKU: "a", Seq: 3, Reason: "r"}}}),
			`{"skus":2,"events":9,"broken":[{"sku":"a","seq":3,"reason":"r"}],"keyed":0,"key_ids":null,"unkeyed":0,"checkpoints":0,"seal_keys_given":null,"unprotected":true}`},
		{"zero chain report", NewChainReportJSON(ledger.ChainReport{}), `{"skus":0,"events":0,"broken":null,"keyed":0,"key_ids":null,"unkeyed":0,"checkpoints":0,"seal_keys_given":null,"unprotected":true}`},
		{"intact chain report", NewChainReportJSON(ledger.ChainReport{Broken: []ledger.BrokenChain{}}), `{"skus":0,"events":0,"broken":[],"keyed":0,"key_ids":null,"unkeyed":0,"checkpoints":0,"seal_keys_given":null,"unprotected":true}`},
		{"keyed chain report", NewChainReportJSON(ledger.ChainReport{SKUs: 1, Events: 3, Sealed: 3, Keyed: 2, KeyIDs: map[string]int64{"k1": 2}, Unkeyed: 1,
			Checkpoints: 1, Newest: domain.Checkpoint{N: 1, At: at, KeyID: "k1", MAC: "ab"}, Latest: 1, KeyedLedger: true, KeysGiven: []string{"k1"}, Broken: []ledger.BrokenChain{}}),
			`{"skus":1,"events":3,"broken":[],"sealed":3,"keyed":2,"key_ids":{"k1":2},"unkeyed":1,"checkpoints":1,` +
				`"newest_checkpoint":{"n":1,"at":"2026-11-29T12:00:00.123Z","key_id":"k1","mac":"ab"},"seal_keys_given":["k1"],"unprotected":false}`},
		{"close", NewCloseResultJSON(ledger.CloseResult{SKU: "a", ClosedAt: at, AlreadyClosed: true}),
			`{"sku":"a","closed_at":"2026-11-29T12:00:00.123Z","already_closed":true}`},
		{"zero close", NewCloseResultJSON(ledger.CloseResult{}), `{"sku":"","closed_at":"0001-01-01T00:00:00Z","already_closed":false}`},
		{"retire", NewRetireResultJSON(ledger.RetireResult{SKU: "a", Seq: 7, RetiredAt: at, AlreadyRetired: true}),
			`{"sku":"a","seq":7,"retired_at":"2026-11-29T12:00:00.123Z","already_retired":true}`},
		{"archive", NewArchiveResultJSON(ledger.ArchiveResult{SKU: "a", Seq: 4, Buyers: 2, Units: 3, ArchivedAt: at, AlreadyArchived: true}),
			`{"sku":"a","seq":4,"buyers":2,"units":3,"archived_at":"2026-11-29T12:00:00.123Z","already_archived":true}`},
		{"zero archive", NewArchiveResultJSON(ledger.ArchiveResult{}),
			`{"sku":"","seq":0,"buyers":0,"units":0,"archived_at":"0001-01-01T00:00:00Z","already_archived":false}`},
		{"archived none", ArchivedJSON{Archived: mapSlice([]ledger.ArchiveResult(nil), NewArchiveResultJSON)}, `{"archived":null}`},
		{"archived empty", ArchivedJSON{Archived: mapSlice([]ledger.ArchiveResult{}, NewArchiveResultJSON)}, `{"archived":[]}`},
		{"archived one", ArchivedJSON{Archived: mapSlice([]ledger.ArchiveResult{{SKU: "a"}}, NewArchiveResultJSON)},
			`{"archived":[{"sku":"a","seq":0,"buyers":0,"units":0,"archived_at":"0001-01-01T00:00:00Z","already_archived":false}]}`},
		{"rebuild", NewRebuildReportJSON(ledger.RebuildReport{SKUs: 2, Corrected: []string{"a"}, Failed: []string{"b"}}),
			`{"skus":2,"corrected":["a"],"failed":["b"]}`},
		{"zero rebuild", NewRebuildReportJSON(ledger.RebuildReport{}), `{"skus":0,"corrected":null}`},
		{"empty rebuild", NewRebuildReportJSON(ledger.RebuildReport{Corrected: []string{}, Failed: []string{}}), `{"skus":0,"corrected":[]}`},
		{"restore", NewRestoreReportJSON(ledger.RestoreReport{SKUs: 2, Rows: 9, Skipped: 1, Failed: []string{"b"}}),
			`{"skus":2,"rows":9,"skipped":1,"failed":["b"]}`},
		{"zero restore", NewRestoreReportJSON(ledger.RestoreReport{}), `{"skus":0,"rows":0,"skipped":0}`},
		{"restore with retired", NewRestoreReportJSON(ledger.RestoreReport{SKUs: 3, Retired: 1}), `{"skus":3,"rows":0,"skipped":0,"retired":1}`},
		{"empty restore", NewRestoreReportJSON(ledger.RestoreReport{Failed: []string{}}), `{"skus":0,"rows":0,"skipped":0}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.what, b, tc.want)
		}
	}
}
