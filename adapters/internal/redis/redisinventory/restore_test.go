package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

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
	if n := must(f.client.HLen(ctx, f.keys.RequestsKey(img.State.SKU)).Result()); n != int64(len(img.State.Requests)) {
		t.Fatalf("%d receipts restored, want %d", n, len(img.State.Requests))
	}

	// A second restore while Redis is already ahead of an older image
	// writes nothing.
	if _, err := deduct(t, f, sku, "u0", 1, "fresh", uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	if err := f.restorer.Restore(ctx, img); !errors.Is(err, ledger.ErrRedisAhead) {
		t.Fatalf("restore of an older image: %v, want ErrRedisAhead", err)
	}
	assertSame(t, before, f.snapshot(t))
}
