package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

type crashOutcome struct {
	mu         sync.Mutex
	receipts   map[string]domain.Receipt // event id → receipt seen as ok
	recovering atomic.Int64
	okAfter    atomic.Int64 // successes after the restart
	soldOut    atomic.Int64
	errs       atomic.Int64
	// done closes once every buyer has returned after stop.
	done chan struct{}
}

// crashSale runs goroutines buying from sku until stop closes, while the
// test kills and restarts Redis; every ok receipt is recorded.
func crashSale(s *stacktest.Stack, sku string, goroutines int, stop <-chan struct{}, restarted *atomic.Bool) *crashOutcome {
	out := &crashOutcome{receipts: map[string]domain.Receipt{}, done: make(chan struct{})}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := fmt.Sprintf("g%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, u, 1, u))
				cancel()
				switch {
				case err == nil:
					out.mu.Lock()
					out.receipts[rc.EventID] = rc
					out.mu.Unlock()
					if restarted.Load() {
						out.okAfter.Add(1)
					}
				case errors.Is(err, domain.ErrRecovering):
					out.recovering.Add(1)
					time.Sleep(20 * time.Millisecond)
				case errors.Is(err, domain.ErrSoldOut):
					out.soldOut.Add(1)
					time.Sleep(20 * time.Millisecond)
				default: // Redis is down: connection errors until it is back
					out.errs.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	go func() { <-stop; wg.Wait(); close(out.done) }()
	return out
}

// runVerifier runs the reconciler's loop, as serve does.
func runVerifier(t *testing.T, s *stacktest.Stack, rec *reconcile.Reconciler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rec.RunLoop(ctx, reconcile.LoopConfig{Interval: time.Hour, NodeRuns: s.NodeRuns.NodeRuns,
			NodeRunsPoll: 100 * time.Millisecond, Changed: s.NodeRunWatch.Changed()})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func TestStrictModeRedisCrashLosesNoAcknowledgedDeduction(t *testing.T) {
	s := stacktest.New(t) // appendfsync always
	const sku = "crash-strict"
	out := crashDuringSale(t, s, sku, &alertSink{}, 500*time.Millisecond)
	assertEveryReceiptInLedgerOnce(t, s, sku, out)
	t.Logf("%d receipts, %d refused as recovering, %d connection errors", len(out.receipts), out.recovering.Load(), out.errs.Load())
}

// crashDuringSale runs a 2,000-goroutine sale of sku with the projector and
// the verifier running as serve runs them, kills Redis with -9 in the middle,
// restarts it from its AOF after down, and waits until sales resume on
// their own and the ledger caught up.
func crashDuringSale(t *testing.T, s *stacktest.Stack, sku string, alerts reconcile.Alerter, down time.Duration) *crashOutcome {
	t.Helper()
	s.SKU(t, sku, 100_000, 1)
	s.RunProjector(t)
	gate := &stampGate{}
	runVerifier(t, s, newReconciler(t, s, alerts, func(c *reconcile.Config) { gate.Inventory = c.Inventory; c.Inventory = gate }))

	stop := make(chan struct{})
	var restarted atomic.Bool
	out := crashSale(s, sku, 2000, stop, &restarted)
	time.Sleep(1500 * time.Millisecond)
	ctx := context.Background()
	release := gate.hold()
	if err := s.Redis.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down)
	if err := s.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)
	probeFence(t, s, sku, out)
	release()
	deadline := time.Now().Add(30 * time.Second)
	for out.okAfter.Load() < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("sales did not resume on their own after the restart: %d ok after, %d recovering, %d errors",
				out.okAfter.Load(), out.recovering.Load(), out.errs.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	// A buyer's purchase still in flight would move Redis after the
	// ledger was compared with it; so would one a buyer gave up waiting for
	// that the client's pipeline still sends.
	<-out.done
	waitRedisSettled(t, s, sku)
	waitCaughtUp(t, s, sku)
	if out.recovering.Load() == 0 {
		t.Fatal("no purchase was refused as recovering: the restart was not fenced")
	}
	return out
}

// probeFence is one more buyer of the sale, made while gate holds the
// verifier's stamps: until one of its purchases is answered, Redis being
// back but no SKU verified yet, so its only right answer is recovering.
// Without it the sale's 2,000 buyers may all time out on the reconnecting
// pool (2 s deadlines on a loaded machine) until the verifier stamped, and
// the fence goes unseen: the flake this replaces. A sale is an error.
func probeFence(t *testing.T, s *stacktest.Stack, sku string, out *crashOutcome) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		u := fmt.Sprintf("probe-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, u, 1, u))
		cancel()
		switch {
		case err == nil:
			t.Fatal("a purchase sold after the restart before the verifier stamped: the restart was not fenced")
		case errors.Is(err, domain.ErrRecovering):
			out.recovering.Add(1)
			return
		case !errors.Is(err, domain.ErrUnavailable) || time.Now().After(deadline):
			t.Fatalf("probe purchase after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stampGate holds the reconciler's stamps and corrections between hold
// and its release, so that a test can observe the fence before any SKU is
// verified; everything else passes through.
type stampGate struct {
	reconcile.Inventory
	mu   sync.Mutex
	open chan struct{} // nil: stamps pass
}

// hold makes stamps wait until the returned release is called.
func (g *stampGate) hold() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.open = ch
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

func (g *stampGate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *stampGate) StampMany(ctx context.Context, skus []domain.SKUID, seqs []int64) ([]bool, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.Inventory.StampMany(ctx, skus, seqs)
}

func (g *stampGate) Correct(ctx context.Context, sku domain.SKUID, seq, stock int64) (bool, error) {
	if err := g.wait(ctx); err != nil {
		return false, err
	}
	return g.Inventory.Correct(ctx, sku, seq, stock)
}

func assertEveryReceiptInLedgerOnce(t *testing.T, s *stacktest.Stack, sku string, out *crashOutcome) {
	t.Helper()
	ctx := context.Background()
	out.mu.Lock()
	defer out.mu.Unlock()
	ids := make([]string, 0, len(out.receipts))
	for id := range out.receipts {
		ids = append(ids, id)
	}
	var found int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE event_id = ANY($1::uuid[])`, ids).Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found != len(ids) {
		t.Fatalf("%d of %d acknowledged deductions are in the ledger", found, len(ids))
	}
	assertNotOversold(t, s, sku)
}

func assertNotOversold(t *testing.T, s *stacktest.Stack, sku string) {
	t.Helper()
	var stocked, sold, released, sum, rows, maxSeq int64
	if err := s.Pool.QueryRow(context.Background(), `SELECT
		COALESCE(SUM(delta) FILTER (WHERE type IN ('stocked','adjusted')), 0),
		COALESCE(SUM(qty) FILTER (WHERE type = 'deducted'), 0),
		COALESCE(SUM(qty) FILTER (WHERE type = 'released'), 0),
		COALESCE(SUM(delta), 0), count(*), COALESCE(max(seq), 0)
		FROM ledger_entries WHERE sku = $1`, sku).Scan(&stocked, &sold, &released, &sum, &rows, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if sold-released > stocked || sum < 0 {
		t.Fatalf("oversold: sold %d released %d stocked %d", sold, released, stocked)
	}
	if rows != maxSeq {
		t.Fatalf("ledger has %d rows up to seq %d: duplicates or gaps", rows, maxSeq)
	}
	st, err := s.Service.State(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if *st.RedisStock != sum {
		t.Fatalf("redis stock %d, ledger %d", *st.RedisStock, sum)
	}
}

func TestEverysecModeRedisCrashLossIsReportedAndNothingOversold(t *testing.T) {
	s := stacktest.New(t, stacktest.WithRedisConfig(func(c *localstack.RedisConfig) { c.AppendFsync = "everysec" }))
	const sku = "crash-everysec"
	alerts := &alertSink{}
	out := crashDuringSale(t, s, sku, alerts, 0)
	ctx := context.Background()

	lost := map[string]bool{}
	alerts.mu.Lock()
	for _, f := range alerts.findings {
		for _, l := range f.Lost {
			lost[l.EventID] = true
		}
	}
	alerts.mu.Unlock()
	out.mu.Lock()
	ids := make([]string, 0, len(out.receipts))
	for id := range out.receipts {
		ids = append(ids, id)
	}
	out.mu.Unlock()
	rows, err := s.Pool.Query(ctx, `SELECT event_id::text FROM ledger_entries WHERE event_id = ANY($1::uuid[])`, ids)
	if err != nil {
		t.Fatal(err)
	}
	inLedger := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inLedger[id] = true
	}
	rows.Close()
	for _, id := range ids {
		if inLedger[id] == lost[id] {
			var seq int64
			var recorded time.Time
			_ = s.Pool.QueryRow(ctx, `SELECT seq, recorded_at FROM ledger_entries WHERE event_id = $1`, id).Scan(&seq, &recorded)
			out.mu.Lock()
			rc := out.receipts[id]
			out.mu.Unlock()
			for _, f := range alerts.findings {
				t.Logf("finding %s %s at %v: %s", f.SKU, f.Class, f.Before.TruthSeq, f.Detail)
			}
			t.Logf("receipt %+v; ledger seq %d recorded %v", rc, seq, recorded)
			t.Fatalf("acknowledged deduction %s: in ledger %v, reported lost %v; want exactly one", id, inLedger[id], lost[id])
		}
	}
	assertNotOversold(t, s, sku)
	t.Logf("%d acknowledged: %d in the ledger, %d reported lost; %d refused as recovering", len(ids), len(inLedger), len(lost), out.recovering.Load())
}

// waitRedisSettled waits until sku's Redis seq stays the same for 300 ms.
func waitRedisSettled(t *testing.T, s *stacktest.Stack, sku string) {
	t.Helper()
	var last int64 = -1
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := s.Service.State(context.Background(), sku)
		if err == nil && v.RedisSeq != nil {
			if *v.RedisSeq == last {
				return
			}
			last = *v.RedisSeq
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis seq of %s did not settle: %v", sku, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
