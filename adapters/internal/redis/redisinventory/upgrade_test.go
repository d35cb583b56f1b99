package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
)

// upgradeSale is a sale's purchases as the processes that made them saw
// them: each request id's first receipt.
type upgradeSale struct {
	mu       sync.Mutex
	receipts map[string]domain.Receipt // by SKU and request id
	sold     map[string]int64          // units, by SKU
}

// buy runs one purchase of 1 unit of sku by user through inv, records a
// sale's receipt, and checks a replay against the receipt recorded.
func (s *upgradeSale) buy(t *testing.T, inv *redisinventory.RedisInventory, sku domain.SKUID, user, req string) {
	rc, err := inv.Deduct(context.Background(), sku, must(domain.NewUserID(user)), must(domain.NewQuantity(1)),
		must(domain.NewRequestID(req)), uuid.NewString())
	if errors.Is(err, domain.ErrSoldOut) || errors.Is(err, domain.ErrAlreadyPurchased) {
		return
	}
	if err != nil {
		t.Errorf("%s buys %s (request %s): %v", user, sku, req, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := sku.String() + " " + req
	first, seen := s.receipts[key]
	switch {
	case !seen && rc.Replayed:
		t.Errorf("request %s: replayed a receipt no purchase made: %+v", req, rc)
	case !seen:
		s.receipts[key] = rc
		s.sold[sku.String()]++
	case !rc.Replayed || rc.Seq != first.Seq || rc.EventID != first.EventID || rc.User != first.User:
		t.Errorf("request %s: retried, got %+v, want the replay of %+v", req, rc, first)
	}
}

// TestALiveSaleSurvivesTheLayoutUpgrade upgrades a fleet in the two
// rollouts docs/deploy.md prescribes while a sale goes on: first every
// process reads both layouts and warms in the 1.0 one (three-hashes),
// then the processes warm in one-hash one after the other. Through it,
// purchases and retries of earlier ones go through old and new processes
// at once, on a SKU warmed before the upgrade and on one warmed after:
// every retry gets its original receipt, no user buys past the limit, and
// stock plus the units sold is the stock warmed, on Redis and in the
// reconciler's snapshot, whose counts of buyers and receipts must match
// what was sold in either layout.
func TestALiveSaleSurvivesTheLayoutUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newLayoutFixture(t, redisinventory.LayoutThreeHashes)
	upgraded := must(redisinventory.NewRedisInventory(f.client, f.keys.WithLayout(redisinventory.LayoutOneHash),
		redisinventory.InventoryConfig{MaxBatch: 16}))
	const stock, limit, buyers = 600, 2, 400
	before := f.warm(t, "upgrade-before", stock, limit)
	sale := &upgradeSale{receipts: map[string]domain.Receipt{}, sold: map[string]int64{}}

	// run sends, from 16 goroutines, one purchase per request named by
	// attempt, each through the inventory chosen by via.
	run := func(sku domain.SKUID, n int, attempt func(i int) (user, req string),
		via func(i int) *redisinventory.RedisInventory) {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := g; i < n; i += 16 {
					user, req := attempt(i)
					sale.buy(t, via(i), sku, user, req)
				}
			})
		}
		wg.Wait()
	}
	old := func(int) *redisinventory.RedisInventory { return f.inv }
	mixed := func(i int) *redisinventory.RedisInventory {
		if i%2 == 0 {
			return f.inv
		}
		return upgraded
	}
	// requests names attempt i of a phase; running a phase again retries
	// each of its requests, as the same user.
	requests := func(phase string) func(i int) (string, string) {
		return func(i int) (string, string) {
			return fmt.Sprint("u", i%buyers), fmt.Sprint(phase, "-", i)
		}
	}

	// Before the second rollout: only the 1.0 layout is written.
	run(before, 200, requests("a"), old)
	// During it: old and new processes sell the same SKU, and retry the
	// purchases of before through either.
	run(before, 200, requests("b"), mixed)
	run(before, 200, requests("a"), mixed)
	// After it: a SKU warmed now is one-hash; both SKUs sell, and every
	// earlier request is retried.
	def := must(domain.NewSKUDefinition(must(domain.NewSKUID("upgrade-after")), stock, limit))
	if _, stocked, err := upgraded.Warm(ctx, def, uuid.NewString()); err != nil || !stocked {
		t.Fatalf("warm upgrade-after: %v %v", stocked, err)
	}
	after := def.SKU()
	if f.layoutOf(t, before.String()) != redisinventory.LayoutThreeHashes || f.layoutOf(t, after.String()) != redisinventory.LayoutOneHash {
		t.Fatal("the SKUs are not one of each layout")
	}
	run(before, 800, requests("c"), mixed)
	run(after, 800, requests("c"), mixed)
	for _, phase := range []string{"a", "b"} {
		run(before, 200, requests(phase), mixed)
	}
	run(before, 800, requests("c"), old)
	run(after, 800, requests("c"), mixed)

	snap := must(f.reconcile.Snapshot(ctx, []domain.SKUID{before, after}))
	for _, sku := range []domain.SKUID{before, after} {
		st := must(upgraded.State(ctx, sku))
		sold := sale.sold[sku.String()]
		if sold == 0 || st.Stock != stock-sold || st.Stock < 0 {
			t.Errorf("%s: stock %d after %d sales of %d", sku, st.Stock, sold, stock)
		}
		holders := map[string]int64{}
		for _, rc := range sale.receipts {
			if rc.SKU == sku.String() {
				holders[rc.User] += rc.Qty
			}
		}
		for user, n := range holders {
			if n > limit {
				t.Errorf("%s: %s bought %d, limit %d", sku, user, n, limit)
			}
		}
		live := snap.SKUs[sku]
		if live.Corrupt != nil || !live.Verified || live.Stock != st.Stock || live.Receipts != sold || live.Buyers != int64(len(holders)) {
			t.Errorf("%s: snapshot %+v, want stock %d, %d receipts and %d buyers", sku, live, st.Stock, sold, len(holders))
		}
	}
}
