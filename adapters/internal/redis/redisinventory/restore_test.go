package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// image folds a ledger of n purchases by distinct users, every third one
// released, into what Redis must hold.
func image(t *testing.T, sku string, n int) ledger.RedisImage {
	t.Helper()
	st := domain.NewSKUState(sku)
	seq := int64(0)
	apply := func(e domain.Event) {
		seq++
		e.SKU, e.Seq, e.ID = sku, seq, uuid.NewString()
		e.Balance = st.Stock + e.Delta
		if err := st.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	apply(domain.Event{Type: domain.EventStocked, Qty: int64(n), Delta: int64(n)})
	for i := range n {
		user, req := fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i)
		apply(domain.Event{Type: domain.EventDeducted, Qty: 1, Delta: -1, User: user, RequestID: req})
		if i%3 == 0 {
			apply(domain.Event{Type: domain.EventReleased, Qty: 1, Delta: 1, User: user, RequestID: req})
		}
	}
	return ledger.RedisImage{State: st, Limit: 1, StockedEventID: uuid.NewString()}
}

// pipelineKeyRecorder records the keys of every script call, pipelined or not.
type pipelineKeyRecorder struct{ keyRecorder }

func (r *pipelineKeyRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			_ = r.ProcessHook(func(context.Context, redis.Cmder) error { return nil })(ctx, c)
		}
		return next(ctx, cmds)
	}
}

// TestRecoveryScriptKeysShareOneClusterSlot does for the restore, close and
// archive scripts what TestScriptKeysShareOneClusterSlot does for the
// purchase path.
func TestRecoveryScriptKeysShareOneClusterSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := &pipelineKeyRecorder{}
	f.client.AddHook(rec)
	ctx := context.Background()
	for i := range 20 {
		img := image(t, fmt.Sprintf("restore-slot-%d", i), 1500)
		if err := f.restorer.Restore(ctx, img); err != nil {
			t.Fatal(err)
		}
		sku := must(domain.NewSKUID(img.State.SKU))
		if _, _, err := f.archiver.CloseSKU(ctx, sku, uuid.NewString(), "olga"); err != nil {
			t.Fatal(err)
		}
		if err := f.archiver.DropBuyers(ctx, sku, img.State.Seq+1); err != nil { // +1: the closed event
			t.Fatal(err)
		}
	}
	// Per SKU: begin, two request chunks and one buyers chunk, finish, close, drop.
	assertOneSlotPerCall(t, rec.calls(), 20*7)
}

// TestRestoreFencesPurchasesUntilComplete hammers a SKU with purchases and
// releases while it is restored: each one is refused as recovering or not
// warmed, or runs on the complete state, never on a half-written one.
func TestRestoreFencesPurchasesUntilComplete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	img := image(t, "fenced-restore", 20000)
	sku := must(domain.NewSKUID(img.State.SKU))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var recovering int
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// u1 holds its limit once restored; until then it must be refused
			// for the restore's sake, not for the limit's.
			_, err := deduct(t, f, sku, "u1", 1, fmt.Sprintf("again-%d", i), uuid.NewString())
			switch {
			case errors.Is(err, domain.ErrRecovering):
				recovering++
			case errors.Is(err, domain.ErrNotWarmed), errors.Is(err, domain.ErrAlreadyPurchased):
			default:
				t.Errorf("deduct by a holder during restore: %v", err)
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	err := f.restorer.Restore(ctx, img)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d purchases refused as recovering during the restore", recovering)
	if _, err := deduct(t, f, sku, "u1", 1, "after", uuid.NewString()); !errors.Is(err, domain.ErrAlreadyPurchased) {
		t.Fatalf("holder after restore: %v, want ErrAlreadyPurchased", err)
	}
	st := must(f.inv.State(ctx, sku))
	if !st.Verified || st.Seq != img.State.Seq || st.Stock != img.State.Stock {
		t.Fatalf("state after restore %+v, want verified at seq %d stock %d", st, img.State.Seq, img.State.Stock)
	}
	if receipts, _ := f.records(t, img.State.SKU); len(receipts) != len(img.State.Requests) {
		t.Fatalf("%d receipts restored, want %d", len(receipts), len(img.State.Requests))
	}

	// A second restore while Redis is already ahead of an older image
	// writes nothing. Compared by contents, not DUMP: a one-hash SKU's
	// hash of 40,000 fields changes its internal order when read.
	if _, err := deduct(t, f, sku, "u0", 1, "fresh", uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	if err := f.restorer.Restore(ctx, img); !errors.Is(err, ledger.ErrRedisAhead) {
		t.Fatalf("restore of an older image: %v, want ErrRedisAhead", err)
	}
	assertSame(t, before, f.snapshot(t))
}

// layoutSale sells sku in f's layout: 1,200 buyers, more than one chunk of
// restore_chunk.lua, every fifth sale released, and a hold left held, one
// confirmed and one cancelled, so that a restore has every kind of record
// to write.
func layoutSale(t *testing.T, f *fixture, name string) domain.SKUID {
	t.Helper()
	ctx := context.Background()
	sku := f.warm(t, name, 5000, 2)
	for i := range 1200 {
		user, req := fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i)
		must(deduct(t, f, sku, user, 1, req, uuid.NewString()))
		if i%5 == 0 {
			must(f.inv.Release(ctx, sku, must(domain.NewUserID(user)), must(domain.NewRequestID(req)), domain.Reason{}, uuid.NewString()))
		}
	}
	must(reserve(t, f, sku, "h1", 2, "hr1", ttlOf(t, 600)))
	confirmed := must(reserve(t, f, sku, "h2", 1, "hr2", ttlOf(t, 600)))
	must(f.inv.ConfirmHold(ctx, sku, holdID(confirmed), uuid.NewString()))
	cancelled := must(reserve(t, f, sku, "h3", 1, "hr3", ttlOf(t, 600)))
	must(f.inv.CancelHold(ctx, sku, holdID(cancelled), uuid.NewString()))
	return sku
}

// liveOf reads sku's hash without what depends on its layout (its r: and
// u: records, their counts, the layout and pad fields) and without its fence, which
// a restore renews: its live fields and hold records.
func (f *fixture) liveOf(t *testing.T, sku string) map[string]string {
	t.Helper()
	hash := must(f.client.HGetAll(context.Background(), f.keys.SKUKey(sku)).Result())
	for field := range hash {
		if strings.HasPrefix(field, "r:") || strings.HasPrefix(field, "u:") {
			delete(hash, field)
		}
	}
	for _, field := range []string{"layout", "receipts", "buyers", "pad", "fence"} {
		delete(hash, field)
	}
	return hash
}

// TestRestoreMovesASKUToTheKeyspacesLayout: a restore writes a SKU in its
// restorer's layout, whichever the SKU had. From either layout to either,
// every receipt, buyer's count, hold record and live field comes back as
// it was, nothing is left where the old layout kept them and a one-hash
// SKU counts its records exactly (fixture.records checks both), and the
// sale goes on in the new layout.
func TestRestoreMovesASKUToTheKeyspacesLayout(t *testing.T) {
	t.Parallel()
	for _, from := range skuLayouts {
		for _, to := range skuLayouts {
			t.Run(string(from)+"-to-"+string(to), func(t *testing.T) {
				t.Parallel()
				f := newLayoutFixture(t, from)
				ctx := context.Background()
				sku := layoutSale(t, f, "relayout")
				s := sku.String()
				if got := f.layoutOf(t, s); got != from {
					t.Fatalf("sold in layout %s, want %s", got, from)
				}
				st := foldStream(t, f, sku)
				receipts, counts := f.records(t, s)
				live := f.liveOf(t, s)
				if len(receipts) != 1203 || len(counts) != 1200-240+2 {
					t.Fatalf("sold %d receipts and %d buyers, want 1,203 and 962", len(receipts), len(counts))
				}

				img := ledger.RedisImage{State: st, Limit: 2, StockedEventID: live["stocked_event_id"]}
				if err := redisinventory.NewRedisRestorer(f.client, f.keys.WithLayout(to)).Restore(ctx, img); err != nil {
					t.Fatal(err)
				}
				if got := f.layoutOf(t, s); got != to {
					t.Fatalf("restored in layout %s, want %s", got, to)
				}
				gotReceipts, gotCounts := f.records(t, s)
				if !maps.Equal(receipts, gotReceipts) {
					t.Fatalf("%d receipts restored, %d before, or some differ", len(gotReceipts), len(receipts))
				}
				if !maps.Equal(counts, gotCounts) {
					t.Fatalf("%d buyers' counts restored, %d before, or some differ", len(gotCounts), len(counts))
				}
				if got := f.liveOf(t, s); !maps.Equal(live, got) {
					t.Fatalf("sku hash restored as\n%v\nwas\n%v", got, live)
				}
				if st := must(f.inv.State(ctx, sku)); !st.Verified {
					t.Fatalf("state after the restore %+v, want verified", st)
				}

				// u1 bought one unit (not released: 1%5 != 0), u5's was
				// released, so u1 may buy one more and u5 two; a newcomer
				// is one buyer more, and each count must follow.
				if _, err := deduct(t, f, sku, "u1", 2, "again-1", uuid.NewString()); !errors.Is(err, domain.ErrAlreadyPurchased) {
					t.Fatalf("u1 past the limit after the restore: %v, want ErrAlreadyPurchased", err)
				}
				must(deduct(t, f, sku, "u1", 1, "again-1b", uuid.NewString()))
				must(deduct(t, f, sku, "u5", 2, "again-5", uuid.NewString()))
				must(deduct(t, f, sku, "newcomer", 1, "new-1", uuid.NewString()))
				must(f.inv.Release(ctx, sku, must(domain.NewUserID("u2")), must(domain.NewRequestID("r2")), domain.Reason{}, uuid.NewString()))
				if rc := must(deduct(t, f, sku, "u3", 1, "r3", uuid.NewString())); !rc.Replayed {
					t.Fatalf("retry of r3 after the restore: %+v, want its original receipt", rc)
				}
				foldStream(t, f, sku)
				// u5 and the newcomer count again, u2 no more.
				if _, counts := f.records(t, s); len(counts) != 962+2-1 {
					t.Fatalf("%d buyers after the sale went on, want 963", len(counts))
				}
			})
		}
	}
}

// TestAOneHashSKUIsAHashtable: a SKU warmed or restored in the one-hash
// layout is a hashtable from its first field (records.lua's
// start_one_hash), also after Redis restarts from an AOF rewritten with
// its RDB preamble, where a small hash of short values would be loaded as
// a listpack, as a SKU of the 1.0 layout still is.
func TestAOneHashSKUIsAHashtable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLayoutFixture(t, redisinventory.LayoutOneHash)
	encoding := func(sku string) string {
		t.Helper()
		return must(f.client.ObjectEncoding(ctx, f.keys.SKUKey(sku)).Result())
	}
	warmed := f.warm(t, "small", 10, 1)
	must(deduct(t, f, warmed, "u1", 1, "r1", uuid.NewString()))
	restored := image(t, "restored-small", 0) // a released receipt alone is longer than a listpack's values
	if err := f.restorer.Restore(ctx, restored); err != nil {
		t.Fatal(err)
	}
	threeHashes := must(redisinventory.NewRedisInventory(f.client, f.keys.WithLayout(redisinventory.LayoutThreeHashes), redisinventory.InventoryConfig{}))
	if _, _, err := threeHashes.Warm(ctx, must(domain.NewSKUDefinition(must(domain.NewSKUID("legacy")), 10, 1)), uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if got := encoding("small"); got != "hashtable" {
			t.Errorf("%s: a warmed one-hash SKU's hash is a %s, want a hashtable", when, got)
		}
		if got := encoding("restored-small"); got != "hashtable" {
			t.Errorf("%s: a restored one-hash SKU's hash is a %s, want a hashtable", when, got)
		}
		if got := encoding("legacy"); got != "listpack" {
			t.Errorf("%s: a small SKU of the 1.0 layout is a %s; the check above needs Redis to keep small hashes as listpacks", when, got)
		}
	}
	check("warmed")

	if err := f.client.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info := must(f.client.Info(ctx, "persistence").Result())
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the AOF rewrite did not end within 20s")
		}
	}
	if err := f.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a restart from the rewritten AOF")
}
