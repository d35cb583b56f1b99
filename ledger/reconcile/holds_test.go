package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestHoldsConserveUnitsUnderLoad has 5,000 goroutines reserve, and each
// confirm, cancel or let its hold expire, with TTLs of 1-2 s, while a
// reconciliation every 100 ms must report no drift. At the end nothing is
// oversold, every hold ended exactly once as its caller was told, and the
// ledger equals Redis with available + held + sold conserved.
func TestHoldsConserveUnitsUnderLoad(t *testing.T) {
	s := stacktest.New(t)
	ctx := context.Background()
	const (
		buyers = 5000
		stock  = 4000 // fewer than the buyers: some reserves find it sold out until holds end
	)
	s.SKU(t, "held", stock, 1)
	s.RunProjector(t)
	rec := newReconciler(t, s, &alertSink{})
	sku := must(domain.NewSKUID("held"))

	sweepCtx, stopSweeping := context.WithCancel(ctx)
	var sweepers sync.WaitGroup
	for range 2 { // two serves' expiries
		sweepers.Go(func() { _ = s.App.HoldExpiry.Run(sweepCtx, 50*time.Millisecond) })
	}
	defer func() { stopSweeping(); sweepers.Wait() }()

	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	var (
		told                       sync.Map // hold id -> domain.HoldStatus the caller was told
		confirmed, refused, failed atomic.Int64
		wg                         sync.WaitGroup
	)
	for i := range buyers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(i), 13))
			seconds := int64(1 + i%2)
			ttl, err := cfg.NewHoldTTL(&seconds)
			if err != nil {
				t.Error(err)
				return
			}
			user, req := must(domain.NewUserID(fmt.Sprintf("u%d", i))), must(domain.NewRequestID(fmt.Sprintf("r%d", i)))
			h, err := s.Inventory.Reserve(ctx, sku, user, must(domain.NewQuantity(1)), req, ttl, "", uuid.NewString())
			if errors.Is(err, domain.ErrSoldOut) {
				refused.Add(1)
				return
			}
			if err != nil {
				failed.Add(1)
				t.Errorf("reserve %d: %v", i, err)
				return
			}
			id, _ := domain.NewHoldID(h.HoldID)
			// Confirm or cancel at a random moment up to a little past the
			// deadline, or let the hold expire.
			time.Sleep(time.Duration(rnd.Int64N(int64(ttl.Duration() * 6 / 5))))
			var end domain.Hold
			switch rnd.IntN(3) {
			case 0:
				end, err = s.Inventory.ConfirmHold(ctx, sku, id, uuid.NewString())
			case 1:
				end, err = s.Inventory.CancelHold(ctx, sku, id, uuid.NewString())
			default:
				told.Store(h.HoldID, domain.HoldExpired)
				return
			}
			switch {
			case err == nil:
				told.Store(h.HoldID, end.Status)
				if end.Status == domain.HoldConfirmed {
					confirmed.Add(1)
				}
			case errors.Is(err, domain.ErrHoldExpired):
				told.Store(h.HoldID, domain.HoldExpired)
			default:
				t.Errorf("end hold %d: %v", i, err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// A failed run stops the reconciling, not the buyers: the test waits
	// for them before it returns, as they use the stack its cleanup closes.
	runs, lagging := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		rep, err := rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
		if err != nil {
			t.Errorf("reconcile run %d: %v", runs, err)
			break
		}
		if len(rep.Drifts) != 0 || len(rep.Repaired) != 0 {
			t.Errorf("drift during the sale (run %d): drifts %+v, repaired %+v", runs, rep.Drifts, rep.Repaired)
			break
		}
		runs++
		lagging += rep.Lagging
		time.Sleep(100 * time.Millisecond)
	}
	<-done
	if t.Failed() {
		return
	}
	// Every hold left to expire is expired by the sweepers, then projected.
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := s.App.Redis.ZCard(ctx, s.Keyspace.SKUExpiryKey("held")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d holds still open 20s after the last deadline", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitCaughtUp(t, s, "held")

	var events []domain.Event
	if err := s.Ledger.ScanSKU(ctx, sku, func(e domain.Event) error { events = append(events, e); return nil }); err != nil {
		t.Fatal(err)
	}
	fold, err := domain.Fold("held", events) // refuses a hold that ended twice
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Inventory.State(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stock != fold.Stock || st.Seq != fold.Seq {
		t.Fatalf("redis stock %d seq %d, ledger stock %d seq %d", st.Stock, st.Seq, fold.Stock, fold.Seq)
	}
	if fold.Held != 0 || fold.OpenHolds() != 0 || fold.Stock+fold.Held+fold.Sold != stock || fold.Stock < 0 {
		t.Fatalf("ledger: available %d + held %d + sold %d, %d open holds; stocked %d", fold.Stock, fold.Held, fold.Sold, fold.OpenHolds(), stock)
	}
	if fold.Sold != confirmed.Load() {
		t.Fatalf("%d units sold, %d confirms acknowledged", fold.Sold, confirmed.Load())
	}
	ended := 0
	told.Range(func(k, v any) bool {
		ended++
		if got := fold.Holds[k.(string)].Status; got != v.(domain.HoldStatus) {
			t.Errorf("hold %s ended %s, its caller was told %s", k, got, v)
		}
		return true
	})
	if ended != len(fold.Holds) || ended+int(refused.Load()) != buyers {
		t.Fatalf("%d holds in the ledger, %d reserves acknowledged, %d sold out", len(fold.Holds), ended, refused.Load())
	}
	rep, err := rec.Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil || len(rep.Drifts) != 0 {
		t.Fatalf("final reconciliation: %v %+v", err, rep.Drifts)
	}
	t.Logf("%d holds: %d confirmed, %d sold out; %d reconciliations (%d lagging observations), no drift",
		ended, confirmed.Load(), refused.Load(), runs, lagging)
}

// must unwraps fixtures that cannot fail unless the test itself is wrong.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("test fixture failed: %v", err))
	}
	return v
}

// TestOpenHoldsSurviveARedisCrashAndAWipe kills Redis (appendfsync always)
// with -9 while holds are open, then wipes it and restores it from the
// ledger: the holds survive both, and later expire or confirm.
func TestOpenHoldsSurviveARedisCrashAndAWipe(t *testing.T) {
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "held-crash", 10, 1)
	s.RunProjector(t)
	runVerifier(t, s, newReconciler(t, s, &alertSink{}))
	sku := must(domain.NewSKUID("held-crash"))
	sweepCtx, stopSweeping := context.WithCancel(ctx)
	var sweeper sync.WaitGroup
	sweeper.Go(func() { _ = s.App.HoldExpiry.Run(sweepCtx, 50*time.Millisecond) })
	defer func() { stopSweeping(); sweeper.Wait() }()

	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	reserve := func(user string, seconds int64) domain.HoldID {
		t.Helper()
		ttl := must(cfg.NewHoldTTL(&seconds))
		h, err := s.Inventory.Reserve(ctx, sku, must(domain.NewUserID(user)), must(domain.NewQuantity(1)),
			must(domain.NewRequestID("req-"+user)), ttl, "", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		return must(domain.NewHoldID(h.HoldID))
	}
	// retry repeats a call refused while Redis restarts or the SKU is
	// verified again, as a caller would, with the same hold.
	retry := func(call func() (domain.Hold, error)) domain.Hold {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			h, err := call()
			if err == nil {
				return h
			}
			if !errors.Is(err, domain.ErrRecovering) && !errors.Is(err, domain.ErrUnavailable) && !errors.Is(err, domain.ErrNotWarmed) || time.Now().After(deadline) {
				t.Fatalf("after the crash: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	confirm := func(id domain.HoldID) func() (domain.Hold, error) {
		return func() (domain.Hold, error) { return s.Inventory.ConfirmHold(ctx, sku, id, uuid.NewString()) }
	}
	a, b, c, d := reserve("a", 60), reserve("b", 60), reserve("c", 2), reserve("d", 60)

	if err := s.Redis.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if h := retry(confirm(a)); h.Status != domain.HoldConfirmed {
		t.Fatalf("confirm after the crash = %+v", h)
	}
	if h := retry(func() (domain.Hold, error) { return s.Inventory.CancelHold(ctx, sku, b, uuid.NewString()) }); h.Status != domain.HoldCancelled {
		t.Fatalf("cancel after the crash = %+v", h)
	}
	waitStatus := func(id domain.HoldID, want domain.HoldStatus) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			h, err := s.Inventory.Hold(ctx, sku, id)
			if err == nil && h.Status == want && (want != domain.HoldExpired || h.EndSeq > 0) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("hold %s: %+v %v, want %s", id, h, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitStatus(c, domain.HoldExpired) // ended by the sweeper, not only past its deadline

	// The wipe: d stays open, e's deadline passes while Redis is empty.
	e := reserve("e", 1)
	s.WaitProjected(t, "held-crash", 30*time.Second)
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := s.Recovery(t).RestoreAll(ctx, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(e, domain.HoldExpired)
	if h := retry(confirm(d)); h.Status != domain.HoldConfirmed {
		t.Fatalf("confirm after the wipe = %+v", h)
	}
	if h, err := s.Inventory.ConfirmHold(ctx, sku, a, uuid.NewString()); err != nil || h.Status != domain.HoldConfirmed {
		t.Fatalf("confirm again after the wipe = %+v, %v; want the original answer", h, err)
	}

	waitCaughtUp(t, s, "held-crash")
	var events []domain.Event
	if err := s.Ledger.ScanSKU(ctx, sku, func(e domain.Event) error { events = append(events, e); return nil }); err != nil {
		t.Fatal(err)
	}
	fold, err := domain.Fold("held-crash", events)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Inventory.State(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stock != fold.Stock || st.Held != fold.Held || fold.Stock != 8 || fold.Sold != 2 || fold.Held != 0 {
		t.Fatalf("redis stock %d held %d; ledger stock %d held %d sold %d; want 8 available, 2 sold", st.Stock, st.Held, fold.Stock, fold.Held, fold.Sold)
	}
	rep, err := newReconciler(t, s, &alertSink{}).Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil || len(rep.Drifts) != 0 {
		t.Fatalf("reconciliation after the crash and the wipe: %v %+v", err, rep.Drifts)
	}
}
