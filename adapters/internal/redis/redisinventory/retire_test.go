package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// TestRetireScriptChecksBeforeItWrites: retire.lua refuses an open SKU, one
// whose buyers are still in Redis, and a stale seq, writing nothing; then
// it removes every key of the SKU and leaves only the tombstone, and its
// keys, like entomb.lua's and restore's, share one cluster slot.
func TestRetireScriptChecksBeforeItWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := &keyRecorder{}
	f.client.AddHook(rec)
	ctx := context.Background()
	sku := f.warm(t, "retire-lua", 10, 1)
	for i := range 3 {
		must(deduct(t, f, sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i), uuid.NewString()))
	}
	const seq = 4 // stocked + 3 deductions

	before := f.snapshot(t)
	if _, err := f.archiver.Retire(ctx, sku, seq); !errors.Is(err, ledger.ErrSKUOpen) {
		t.Fatalf("retire of an open sku: %v, want ErrSKUOpen", err)
	}
	assertSame(t, before, f.snapshot(t))
	if _, _, err := f.archiver.CloseSKU(ctx, sku, uuid.NewString(), "olga"); err != nil {
		t.Fatal(err)
	}
	const closedSeq = seq + 1 // the closed event
	before = f.snapshot(t)
	if _, err := f.archiver.Retire(ctx, sku, closedSeq); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire with buyers in Redis: %v, want ErrNotArchived", err)
	}
	assertSame(t, before, f.snapshot(t))
	if err := f.archiver.DropBuyers(ctx, sku, closedSeq); err != nil {
		t.Fatal(err)
	}
	before = f.snapshot(t)
	if _, err := f.archiver.Retire(ctx, sku, closedSeq-1); !errors.Is(err, ledger.ErrSeqMoved) {
		t.Fatalf("retire at a stale seq: %v, want ErrSeqMoved", err)
	}
	assertSame(t, before, f.snapshot(t))
	if retired, err := f.inv.Retired(ctx, sku); err != nil || retired {
		t.Fatalf("retired before retirement: %v %v", retired, err)
	}
	fp, err := redisinventory.ReadFootprint(ctx, f.client, f.keys, sku.String())
	if err != nil || fp.SKU == 0 || fp.Requests == 0 || fp.Buyers != 0 || fp.Tombstones != 0 || fp.UsedMemory == 0 {
		t.Fatalf("footprint before retirement: %+v %v", fp, err)
	}

	if already, err := f.archiver.Retire(ctx, sku, closedSeq); err != nil || already {
		t.Fatalf("retire: %v %v", already, err)
	}
	keys := must(f.client.Keys(ctx, "*"+sku.String()).Result())
	if len(keys) != 0 {
		t.Fatalf("keys left after retirement: %v", keys)
	}
	if retired, err := f.inv.Retired(ctx, sku); err != nil || !retired {
		t.Fatalf("retired after retirement: %v %v", retired, err)
	}
	if fp, err = redisinventory.ReadFootprint(ctx, f.client, f.keys, sku.String()); err != nil || fp.Keys() != 0 || fp.Tombstones == 0 {
		t.Fatalf("footprint after retirement: %+v %v", fp, err)
	}
	if already, err := f.archiver.Retire(ctx, sku, closedSeq); err != nil || !already {
		t.Fatalf("retire again: %v %v, want already", already, err)
	}
	if _, err := deduct(t, f, sku, "late", 1, "late", uuid.NewString()); !errors.Is(err, domain.ErrNotWarmed) {
		t.Fatalf("deduct of a retired sku: %v, want the script's not warmed", err)
	}
	if present, err := f.restorer.Entomb(ctx, sku); err != nil || present {
		t.Fatalf("entomb a retired sku: %v %v", present, err)
	}
	other := f.warm(t, "retire-live", 1, 1)
	if present, err := f.restorer.Entomb(ctx, other); err != nil || !present {
		t.Fatalf("entomb a live sku: %v %v, want it left alone", present, err)
	}
	if retired := must(f.inv.Retired(ctx, other)); retired {
		t.Fatal("a live sku was tombstoned")
	}
	unknown := must(domain.NewSKUID("never-warmed"))
	if _, err := f.archiver.Retire(ctx, unknown, 1); !errors.Is(err, domain.ErrNotWarmed) {
		t.Fatalf("retire of an unknown sku: %v, want ErrNotWarmed", err)
	}
	assertOneSlotPerCall(t, rec.calls(), 10)
}
