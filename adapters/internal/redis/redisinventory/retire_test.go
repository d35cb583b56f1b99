package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// TestRetireScriptChecksBeforeItWrites: retire.lua refuses an open SKU, one
// whose buyers are still in Redis, and a stale seq, writing nothing; then
// it removes every key of the SKU and leaves only the tombstone, and its
// keys, like entomb.lua's and restore's, share one cluster slot. In both
// layouts.
func TestRetireScriptChecksBeforeItWrites(t *testing.T) {
	t.Parallel()
	forEachLayout(t, testRetireScriptChecksBeforeItWrites)
}

func testRetireScriptChecksBeforeItWrites(t *testing.T, f *fixture) {
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

// TestDropBuyersOfAOneHashSKUInSteps: a one-hash SKU's 2,500 buyers' counts
// go a page at a time, no call deleting more than one page. A drop stopped
// midway leaves the SKU's count of buyers exact, Buyers reporting it
// archived with no buyers (what is left is not the buyers), and retire
// refusing it, even with archived_at there. A release in between makes
// the next step at the old seq refuse, writing nothing; the drop at the
// new seq goes on where it stopped, sets archived_at once no count is
// left, and retire then removes the SKU.
func TestDropBuyersOfAOneHashSKUInSteps(t *testing.T) {
	t.Parallel()
	f := newLayoutFixture(t, redisinventory.LayoutOneHash)
	ctx := context.Background()
	img := image(t, "drop-steps", 3750) // every third of 3,750 sales released
	if len(img.State.Buyers) != 2500 {
		t.Fatalf("%d buyers, want 2,500", len(img.State.Buyers))
	}
	if err := f.restorer.Restore(ctx, img); err != nil {
		t.Fatal(err)
	}
	sku := must(domain.NewSKUID(img.State.SKU))
	s := sku.String()
	if _, _, err := f.archiver.CloseSKU(ctx, sku, uuid.NewString(), "olga"); err != nil {
		t.Fatal(err)
	}
	seq := img.State.Seq + 1 // the closed event

	buyers, archived, err := f.archiver.Buyers(ctx, sku)
	if err != nil || archived || len(buyers) != 2500 {
		t.Fatalf("buyers before the drop: %d, archived %v, %v; want 2,500", len(buyers), archived, err)
	}
	for user, n := range img.State.Buyers {
		if buyers[user] != n {
			t.Fatalf("buyer %s holds %d, the image %d", user, buyers[user], n)
		}
	}

	calls := stacktest.NewDropPages(f.keys, s, 2)
	f.client.AddHook(calls)
	if err := f.archiver.DropBuyers(ctx, sku, seq); err == nil {
		t.Fatal("a drop whose second page was lost succeeded")
	}
	_, counts := f.records(t, s) // and its count of them is exact
	if len(counts) == 0 || len(counts) == 2500 {
		t.Fatalf("a drop stopped at its second page left %d counts, want some of the 2,500 gone", len(counts))
	}
	if buyers, archived, err := f.archiver.Buyers(ctx, sku); err != nil || !archived || len(buyers) != 0 {
		t.Fatalf("buyers after a drop stopped midway: %d, archived %v, %v; want archived, none", len(buyers), archived, err)
	}
	if _, err := f.archiver.Retire(ctx, sku, seq); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire after a drop stopped midway: %v, want ErrNotArchived", err)
	}
	must(f.client.HSet(ctx, f.keys.SKUKey(s), "archived_at", "1").Result())
	if _, err := f.archiver.Retire(ctx, sku, seq); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire with buyers' counts left and archived_at: %v, want ErrNotArchived", err)
	}
	must(f.client.HDel(ctx, f.keys.SKUKey(s), "archived_at").Result())

	// u1's sale (r1, not released: 1%3 != 0) is released: its count goes
	// or was gone, and the count of buyers stays exact either way.
	rel := must(f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("r1")), domain.Reason{}, uuid.NewString()))
	if rel.Seq != seq+1 {
		t.Fatalf("release at seq %d, want %d", rel.Seq, seq+1)
	}
	_, counts = f.records(t, s)
	before := f.snapshot(t)
	calls.FailAt(0)
	if err := f.archiver.DropBuyers(ctx, sku, seq); !errors.Is(err, ledger.ErrSeqMoved) {
		t.Fatalf("drop at the seq before the release: %v, want ErrSeqMoved", err)
	}
	assertSame(t, before, f.snapshot(t))

	if err := f.archiver.DropBuyers(ctx, sku, seq+1); err != nil {
		t.Fatal(err)
	}
	pages := 0
	for _, n := range calls.Fields() {
		if n > 1000 {
			t.Fatalf("a drop call deleted %d counts, more than a page", n)
		}
		if n > 0 {
			pages++
		}
	}
	if pages < 2 {
		t.Fatalf("the %d counts left went in %d calls, want pages", len(counts), pages)
	}
	t.Logf("the %d counts left went in %d calls of at most %d", len(counts), pages, slices.Max(calls.Fields()))
	receipts, left := f.records(t, s)
	if len(left) != 0 || len(receipts) != len(img.State.Requests) {
		t.Fatalf("after the drop %d counts and %d receipts are left, want none and %d", len(left), len(receipts), len(img.State.Requests))
	}
	hash := must(f.client.HMGet(ctx, f.keys.SKUKey(s), "archived_at", "archiving", "buyers").Result())
	if at, _ := hash[0].(string); at == "" || hash[1] != nil || hash[2] != "0" {
		t.Fatalf("archived_at, archiving and buyers after the drop: %v, want a time, none and 0", hash)
	}
	if _, err := strconv.ParseInt(hash[0].(string), 10, 64); err != nil {
		t.Fatalf("archived_at %v: %v", hash[0], err)
	}
	if buyers, archived, err := f.archiver.Buyers(ctx, sku); err != nil || !archived || len(buyers) != 0 {
		t.Fatalf("buyers after the drop: %v, archived %v, %v", buyers, archived, err)
	}
	again := f.snapshot(t)
	if err := f.archiver.DropBuyers(ctx, sku, seq+1); err != nil {
		t.Fatalf("drop again: %v", err)
	}
	if !maps.Equal(again, f.snapshot(t)) {
		t.Fatal("a second drop wrote")
	}

	if already, err := f.archiver.Retire(ctx, sku, seq+1); err != nil || already {
		t.Fatalf("retire: %v %v", already, err)
	}
	if keys := must(f.client.Keys(ctx, "*"+s).Result()); len(keys) != 0 {
		t.Fatalf("keys left after retirement: %v", keys)
	}
}

// TestDropBuyersRefusesACountOfBuyersThatLies: a one-hash SKU's count of
// buyers above its u: fields ends the drop after a full pass that finds
// none, and one below those of a page refuses that page, writing nothing
// of it; both are a corrupt SKU state, which a restore repairs, never a
// drop that loops or marks the SKU archived with counts left.
func TestDropBuyersRefusesACountOfBuyersThatLies(t *testing.T) {
	t.Parallel()
	f := newLayoutFixture(t, redisinventory.LayoutOneHash)
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		lie        int64
		countsLeft int
		buyers     string
	}{
		{"drop-high", 2, 0, "2"}, // a pass drops all three, and finds none to drop next
		{"drop-low", -2, 3, "1"}, // the page of three is refused
	} {
		lie := c.lie
		sku := f.warm(t, c.name, 10, 1)
		s := sku.String()
		for i := range 3 {
			must(deduct(t, f, sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i), uuid.NewString()))
		}
		if _, _, err := f.archiver.CloseSKU(ctx, sku, uuid.NewString(), "olga"); err != nil {
			t.Fatal(err)
		}
		must(f.client.HIncrBy(ctx, f.keys.SKUKey(s), "buyers", lie).Result())
		err := f.archiver.DropBuyers(ctx, sku, 5) // stocked, 3 sales, closed
		var ce *ledger.CorruptRecordError
		if !errors.As(err, &ce) || ce.Record.Kind != ledger.RecordSKU || !errors.Is(err, redisinventory.ErrScript) {
			t.Fatalf("drop with the count of buyers %+d: %v, want a corrupt sku state", lie, err)
		}
		hash := must(f.client.HGetAll(ctx, f.keys.SKUKey(s)).Result())
		var counts int
		for _, u := range []string{"u:u0", "u:u1", "u:u2"} {
			if _, ok := hash[u]; ok {
				counts++
			}
		}
		if _, ok := hash["archived_at"]; ok {
			t.Fatalf("count %+d: archived_at set with the count of buyers wrong: %v", lie, hash)
		}
		if counts != c.countsLeft || hash["buyers"] != c.buyers {
			t.Fatalf("count %+d: %d counts left and buyers %q: %v", lie, counts, hash["buyers"], hash)
		}
	}
}
