package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestSKUStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	skus := pgstore.NewPostgresSKUStore(newPool(t))
	def := defineSKU(t, skus, "sku-a", 10, 2)

	if created, err := skus.Create(ctx, def); err != nil || created {
		t.Fatalf("identical create: created %v err %v, want false, nil", created, err)
	}
	other, _ := domain.NewSKUDefinition(def.SKU(), 11, 2)
	if _, err := skus.Create(ctx, other); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("different create: %v, want ErrConflict", err)
	}
	if got, err := skus.Get(ctx, def.SKU()); err != nil || got != def {
		t.Fatalf("get: %v %v, want %v", got, err, def)
	}
	if _, err := skus.Get(ctx, mustSKU(t, "nope")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("get unknown: %v, want ErrNotFound", err)
	}

	first, second := uuid.NewString(), uuid.NewString()
	if id, err := skus.ClaimStockedEventID(ctx, def.SKU(), first); err != nil || id != first {
		t.Fatalf("first claim: %q %v", id, err)
	}
	if id, err := skus.ClaimStockedEventID(ctx, def.SKU(), second); err != nil || id != first {
		t.Fatalf("second claim: %q %v, want the first id", id, err)
	}
	if _, err := skus.ClaimStockedEventID(ctx, mustSKU(t, "nope"), second); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("claim for unknown sku: %v, want ErrNotFound", err)
	}
	// The stocked event id is unique across SKUs.
	defineSKU(t, skus, "sku-b", 5, 1)
	if _, err := skus.ClaimStockedEventID(ctx, mustSKU(t, "sku-b"), first); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("claim of another sku's id: %v, want ErrConflict", err)
	}

	if ids, err := skus.List(ctx); err != nil || len(ids) != 2 || ids[0].String() != "sku-a" || ids[1].String() != "sku-b" {
		t.Fatalf("list: %v %v", ids, err)
	}
}

func TestSKUStoreLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	skus := pgstore.NewPostgresSKUStore(pool)
	def := defineSKU(t, skus, "closing", 3, 1)
	defineSKU(t, skus, "open", 3, 1)

	rec, err := skus.Record(ctx, def.SKU())
	if err != nil || rec.Definition != def || !rec.ClosedAt.IsZero() || rec.Archive != nil {
		t.Fatalf("record of an open sku: %+v %v", rec, err)
	}
	if _, err := skus.Record(ctx, mustSKU(t, "nope")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("record of unknown sku: %v, want ErrNotFound", err)
	}
	closedAt := t0
	if got, err := skus.RecordClosed(ctx, def.SKU(), closedAt); err != nil || !got.Equal(closedAt) {
		t.Fatalf("record closed: %v %v", got, err)
	}
	if got, err := skus.RecordClosed(ctx, def.SKU(), closedAt.Add(time.Hour)); err != nil || !got.Equal(closedAt) {
		t.Fatalf("second close: %v %v, want the first time kept", got, err)
	}
	if _, err := skus.RecordClosed(ctx, mustSKU(t, "nope"), closedAt); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("close unknown sku: %v, want ErrNotFound", err)
	}
	if ids, err := skus.ClosedUnarchived(ctx, time.Minute); err != nil || len(ids) != 1 || ids[0] != def.SKU() {
		t.Fatalf("closed unarchived: %v %v", ids, err)
	}

	archives := pgstore.NewPostgresBuyerArchiveStore(pool)
	if _, _, err := archives.RecordArchive(ctx, archiveOf("closing", 4, map[string]int64{"u1": 1}),
		func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if ids, err := skus.ClosedUnarchived(ctx, time.Minute); err != nil || len(ids) != 0 {
		t.Fatalf("closed unarchived after archive: %v %v", ids, err)
	}
	recs, err := skus.Records(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records: %+v %v", recs, err)
	}
	if a := recs[0].Archive; a == nil || a.Seq != 4 || a.Buyers != 1 || a.Units != 1 || a.ArchivedAt.IsZero() {
		t.Fatalf("archive summary: %+v", a)
	}
	if recs[1].Definition.SKU().String() != "open" || recs[1].Archive != nil {
		t.Fatalf("open sku's record: %+v", recs[1])
	}

	// Retire, retire again (the first is kept), reopen, and the delay of
	// the automatic retirement counts from the reopening.
	if ids, err := skus.ClosedUnretired(ctx, time.Minute); err != nil || len(ids) != 1 || ids[0] != def.SKU() {
		t.Fatalf("closed unretired: %v %v", ids, err)
	}
	first := ledger.Retirement{Seq: 4, At: t0.Add(time.Minute)}
	if got, err := skus.RecordRetired(ctx, def.SKU(), first); err != nil || got.Seq != 4 || !got.At.Equal(first.At) {
		t.Fatalf("record retired: %+v %v", got, err)
	}
	if got, err := skus.RecordRetired(ctx, def.SKU(), ledger.Retirement{Seq: 9, At: t0.Add(time.Hour)}); err != nil || got.Seq != 4 || !got.At.Equal(first.At) {
		t.Fatalf("second retirement: %+v %v, want the first kept", got, err)
	}
	if _, err := skus.RecordRetired(ctx, mustSKU(t, "nope"), first); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("retire unknown sku: %v, want ErrNotFound", err)
	}
	if rec, err := skus.Record(ctx, def.SKU()); err != nil || rec.Retired == nil || rec.Retired.Seq != 4 || !rec.ReopenedAt.IsZero() {
		t.Fatalf("record of a retired sku: %+v %v", rec, err)
	}
	if ids, err := skus.ClosedUnretired(ctx, 0); err != nil || len(ids) != 0 {
		t.Fatalf("closed unretired after retirement: %v %v, want none", ids, err)
	}
	page, err := skus.Page(ctx, "", 10)
	if err != nil || len(page) != 2 || !page[0].Retired || page[1].Retired {
		t.Fatalf("page: %+v %v, want closing retired, open not", page, err)
	}
	if err := skus.RecordReopened(ctx, def.SKU()); err != nil {
		t.Fatal(err)
	}
	if rec, err := skus.Record(ctx, def.SKU()); err != nil || rec.Retired != nil || rec.ReopenedAt.IsZero() {
		t.Fatalf("record after reopening: %+v %v", rec, err)
	}
	if ids, err := skus.ClosedUnretired(ctx, time.Minute); err != nil || len(ids) != 0 {
		t.Fatalf("closed unretired just after reopening: %v %v, want none", ids, err)
	}
	if ids, err := skus.ClosedUnretired(ctx, 0); err != nil || len(ids) != 1 {
		t.Fatalf("closed unretired with no delay: %v %v, want the reopened sku", ids, err)
	}
}
