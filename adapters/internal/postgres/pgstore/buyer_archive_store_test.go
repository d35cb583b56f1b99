package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/ledger"
)

func archiveOf(sku string, seq int64, buyers map[string]int64) ledger.BuyerArchive {
	var units int64
	for _, q := range buyers {
		units += q
	}
	return ledger.BuyerArchive{SKU: sku, Seq: seq, Buyers: buyers, Units: units}
}

func TestBuyerArchiveStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	skus := pgstore.NewPostgresSKUStore(pool)
	defineSKU(t, skus, "a", 10, 3)
	archives := pgstore.NewPostgresBuyerArchiveStore(pool)
	a := archiveOf("a", 6, map[string]int64{"u1": 2, "u2": 3})

	dropErr := errors.New("redis refused")
	if _, _, err := archives.RecordArchive(ctx, a, func(context.Context) error { return dropErr }); !errors.Is(err, dropErr) {
		t.Fatalf("archive with a failing drop: %v, want its error", err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM buyer_archives) + (SELECT count(*) FROM buyer_archive_entries)`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows after a failed drop: %d %v, want none", rows, err)
	}

	drops := 0
	drop := func(context.Context) error { drops++; return nil }
	sum, recorded, err := archives.RecordArchive(ctx, a, drop)
	if err != nil || !recorded || drops != 1 || sum.Seq != 6 || sum.Buyers != 2 || sum.Units != 5 || sum.ArchivedAt.IsZero() {
		t.Fatalf("archive: %+v recorded %v drops %d err %v", sum, recorded, drops, err)
	}
	again, recorded, err := archives.RecordArchive(ctx, archiveOf("a", 6, map[string]int64{"u9": 1}), drop)
	if err != nil || recorded || drops != 1 || again != sum {
		t.Fatalf("archive at the same seq: %+v recorded %v drops %d err %v, want the first one back", again, recorded, drops, err)
	}
	// A SKU that moved since (reopened after retirement) is archived again
	// as a new version; the first stays.
	v2, recorded, err := archives.RecordArchive(ctx, archiveOf("a", 9, map[string]int64{"u1": 2, "u2": 2}), drop)
	if err != nil || !recorded || drops != 2 || v2.Seq != 9 || v2.Units != 4 {
		t.Fatalf("archive at a later seq: %+v recorded %v drops %d err %v, want a second version", v2, recorded, drops, err)
	}
	var versions, entries int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM buyer_archives WHERE sku = 'a'),
		(SELECT count(*) FROM buyer_archive_entries WHERE sku = 'a' AND version = 2)`).Scan(&versions, &entries); err != nil || versions != 2 || entries != 2 {
		t.Fatalf("versions %d, entries of version 2 %d, err %v; want 2 and 2", versions, entries, err)
	}
	rec, err := skus.Record(ctx, mustSKU(t, "a"))
	if err != nil || rec.Archive == nil || rec.Archive.Seq != 9 {
		t.Fatalf("record after two archives: %+v %v, want the latest, at seq 9", rec, err)
	}
	for _, stmt := range []string{`UPDATE buyer_archive_entries SET qty = 9`, `DELETE FROM buyer_archives`} {
		if _, err := pool.Exec(ctx, stmt); pgCode(err) != pgInsufficientPrivilege {
			t.Errorf("%s: %v, want refused", stmt, err)
		}
	}
}
