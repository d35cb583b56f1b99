package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestRepairsOfSeveralProcessesNeverRepairADriftTwice runs four
// reconcilers, as four processes would (each holding the repair lock on a
// PostgreSQL session of its own), at once over the same tampered SKUs:
// every drift is repaired and alerted exactly once across them.
func TestRepairsOfSeveralProcessesNeverRepairADriftTwice(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	skus := []string{"dup-1", "dup-2", "dup-3"}
	for _, sku := range skus {
		s.SKU(t, sku, 20, 1)
		if err := s.RedisClient.HIncrBy(ctx, s.Keyspace.SKUKey(sku), "stock", -2).Err(); err != nil {
			t.Fatal(err)
		}
	}
	alerts := &alertSink{}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		repaired = map[string]int{}
	)
	for range 4 {
		rec := newReconciler(t, s, alerts, func(c *reconcile.Config) {
			c.RepairLock = s.AdvisoryLock("reconcile-repair")
		})
		wg.Go(func() {
			rep, err := rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range rep.Repaired {
				repaired[f.SKU+"/"+string(f.Class)]++
			}
		})
	}
	wg.Wait()
	want := map[string]int{}
	for _, sku := range skus {
		want[sku+"/"+string(reconcile.ClassRedisLow)] = 1
	}
	if fmt.Sprint(repaired) != fmt.Sprint(want) || len(alerts.findings) != len(skus) {
		t.Fatalf("repaired %v with %d alerts, want each drift repaired and alerted once: %v", repaired, len(alerts.findings), want)
	}
}
