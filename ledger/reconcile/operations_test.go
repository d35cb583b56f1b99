package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestLoopRepairsAreRecordedAsTheReconciler: a repair the periodic loop
// makes is in the operations audit trail as done by system:reconciler.
func TestLoopRepairsAreRecordedAsTheReconciler(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "op-loop", 20, 1)
	s.ProjectStreams(t)
	if err := s.RedisClient.HIncrBy(ctx, s.Keyspace.SKUKey("op-loop"), "stock", 4).Err(); err != nil {
		t.Fatal(err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.App.Reconciler.RunLoop(loopCtx, reconcile.LoopConfig{Interval: 200 * time.Millisecond, NodeRuns: s.NodeRuns.NodeRuns})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var actor string
		err := s.Pool.QueryRow(ctx, `SELECT actor FROM operations WHERE sku = 'op-loop' AND action = 'repair'`).Scan(&actor)
		if err == nil {
			if actor != "system:reconciler" {
				t.Fatalf("repair recorded as done by %q, want system:reconciler", actor)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no repair recorded within 10 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
