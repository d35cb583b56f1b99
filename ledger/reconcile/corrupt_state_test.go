package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// stateCorruption damages one SKU's state in Redis as a hand edit, a bug
// or a bad restore could.
type stateCorruption struct {
	sku string
	// buyer, when set, is the one user whose count is damaged: only that
	// user's purchases meet it.
	buyer  string
	damage func(ctx context.Context, s *stacktest.Stack, sku string) error
}

// wrongType replaces key by a string.
func wrongType(key func(s *stacktest.Stack, sku string) string) func(context.Context, *stacktest.Stack, string) error {
	return func(ctx context.Context, s *stacktest.Stack, sku string) error {
		return s.RedisClient.Set(ctx, key(s, sku), "not-a-hash", 0).Err()
	}
}

// setField writes value over field of the SKU hash.
func setField(field, value string) func(context.Context, *stacktest.Stack, string) error {
	return func(ctx context.Context, s *stacktest.Stack, sku string) error {
		return s.RedisClient.HSet(ctx, s.Keyspace.SKUKey(sku), field, value).Err()
	}
}

var stateCorruptions = []stateCorruption{
	{sku: "bad-hash", damage: wrongType(func(s *stacktest.Stack, sku string) string { return s.Keyspace.SKUKey(sku) })},
	{sku: "bad-buyers", damage: wrongType(func(s *stacktest.Stack, sku string) string { return s.Keyspace.BuyersKey(sku) })},
	{sku: "bad-requests", damage: wrongType(func(s *stacktest.Stack, sku string) string { return s.Keyspace.RequestsKey(sku) })},
	{sku: "bad-stock", damage: setField("stock", "abc")},
	{sku: "bad-seq", damage: setField("seq", "xyz")},
	{sku: "bad-limit", damage: setField("limit", "lots")},
	{sku: "bad-buyer", buyer: "pre-0", damage: func(ctx context.Context, s *stacktest.Stack, sku string) error {
		v, err := s.RedisClient.HMGet(ctx, s.Keyspace.SKUKey(sku), "layout").Result()
		if err != nil {
			return err
		}
		layout, _ := v[0].(string) // nil: the 1.0 layout
		key, field := s.Keyspace.CountAt(sku, layout, "pre-0")
		return s.RedisClient.HSet(ctx, key, field, "xx").Err()
	}},
	// A one-hash SKU's own fields (docs/storage.md).
	{sku: "bad-layout", damage: setField("layout", "two-hashes")},
	{sku: "bad-count", damage: setField("buyers", "many")},
}

// unavailable tells a refusal that says "retry": HTTP 503 with Retry-After.
func unavailable(err error) bool {
	c := domain.CodeOf(err)
	return c == domain.CodeUnavailable || c == domain.CodeRecovering
}

// corruptBuyer buys from sku until a purchase succeeds after ready, and
// records what it was answered meanwhile.
type corruptBuyer struct {
	sku      string
	refused  atomic.Int64 // 503s
	wrong    atomic.Value // the first answer that was neither a sale nor a 503
	sold     atomic.Bool
	receipts []domain.Receipt
}

func (b *corruptBuyer) run(s *stacktest.Stack, user func(i int) string, deadline time.Time) {
	for i := 0; time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(b.sku, user(i), 1, fmt.Sprintf("%s-try-%d", b.sku, i)))
		cancel()
		switch {
		case err == nil:
			b.receipts = append(b.receipts, rc)
			b.sold.Store(true)
			return
		case unavailable(err), errors.Is(err, context.DeadlineExceeded):
			b.refused.Add(1)
		default:
			b.wrong.CompareAndSwap(nil, err.Error())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOneCorruptSKUStateNeverStopsTheSale damages every kind of per-SKU
// state on a SKU of its own, then kills Redis with -9 in the middle of a
// sale of two healthy SKUs and restarts it: the healthy SKUs sell again
// as soon as the restart is verified, each damaged SKU answers 503 until
// it is restored from the ledger, then sells again; nothing is oversold
// and every acknowledged purchase is in the ledger once. Before this
// change the restart check failed on the first damaged key, and every SKU
// answered recovering until the key was deleted by hand.
func TestOneCorruptSKUStateNeverStopsTheSale(t *testing.T) {
	// Beside the package's other parallel tests: its own wait for the
	// ledger can take half a minute when the projector stalls after the
	// kill (see catchUpStall).
	t.Parallel()
	sink := &alertSink{}
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.Alerter = sink })) // appendfsync always
	ctx := context.Background()
	healthy := []string{"fine-1", "fine-2"}
	for _, sku := range healthy {
		s.SKU(t, sku, 100_000, 1)
	}
	for _, c := range stateCorruptions {
		s.SKU(t, c.sku, 1000, 2)
		for i := range 3 { // buyers and receipts the restore must bring back
			if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(c.sku, fmt.Sprintf("pre-%d", i), 1, fmt.Sprintf("pre-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.SKU(t, "bad-refusals", 1000, 2)
	if err := s.RedisClient.Set(ctx, s.Keyspace.RefusalsKey("bad-refusals"), "not-a-hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.RunProjector(t)
	for _, c := range stateCorruptions {
		waitCaughtUp(t, s, c.sku)
	}
	runVerifier(t, s, newReconciler(t, s, sink))
	// The damage comes after the verifier's pass at its start, so that the
	// restart check is the first to meet it.
	waitFirstPass(t, s)
	for _, c := range stateCorruptions {
		if err := c.damage(ctx, s, c.sku); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var restarted atomic.Bool
	outs := make([]*crashOutcome, len(healthy))
	for i, sku := range healthy {
		outs[i] = crashSale(s, sku, 200, stop, &restarted)
	}
	time.Sleep(time.Second)
	if err := s.Redis.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := s.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted.Store(true)

	var wg sync.WaitGroup
	buyers := make([]*corruptBuyer, len(stateCorruptions))
	deadline := time.Now().Add(60 * time.Second)
	for i, c := range stateCorruptions {
		buyers[i] = &corruptBuyer{sku: c.sku}
		user := func(i int) string { return fmt.Sprintf("after-%d", i) }
		if c.buyer != "" {
			user = func(int) string { return c.buyer } // the damaged count's own buyer: under the limit once rebuilt
		}
		wg.Go(func() { buyers[i].run(s, user, deadline) })
	}
	for _, out := range outs {
		healthyDeadline := time.Now().Add(30 * time.Second)
		for out.okAfter.Load() < 100 {
			if time.Now().After(healthyDeadline) {
				t.Fatalf("healthy sales did not resume beside the damaged skus: %d ok after the restart, %d recovering, %d errors",
					out.okAfter.Load(), out.recovering.Load(), out.errs.Load())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	wg.Wait()
	close(stop)
	for _, out := range outs {
		<-out.done
	}

	for _, b := range buyers {
		if w := b.wrong.Load(); w != nil {
			t.Errorf("%s answered %q: a damaged sku answers 503 until it is restored, never another error", b.sku, w)
		}
		if !b.sold.Load() {
			t.Errorf("%s never sold again within 60 s (%d answers 503): it was not restored from the ledger", b.sku, b.refused.Load())
		}
		if b.refused.Load() == 0 {
			t.Errorf("%s sold at once after the restart: its damage was not met", b.sku)
		}
	}
	for i, sku := range healthy {
		waitRedisSettled(t, s, sku)
		waitCaughtUp(t, s, sku)
		assertEveryReceiptInLedgerOnce(t, s, sku, outs[i])
	}
	for _, b := range buyers {
		waitCaughtUp(t, s, b.sku)
		assertNotOversold(t, s, b.sku)
		for _, rc := range b.receipts {
			var n int
			if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE event_id = $1`, rc.EventID).Scan(&n); err != nil || n != 1 {
				t.Errorf("%s: the sale after the restore is %d times in the ledger (%v)", b.sku, n, err)
			}
		}
		// The restore brought back the purchases made before the damage.
		v, err := s.Service.State(ctx, b.sku)
		if err != nil || v.RedisSeq == nil || *v.RedisSeq < 5 {
			t.Errorf("%s after its restore: %+v, %v; want its three earlier sales kept", b.sku, v, err)
		}
	}
	if kind, err := s.RedisClient.Type(ctx, s.Keyspace.RefusalsKey("bad-refusals")).Result(); err != nil || kind == "string" {
		t.Errorf("the refusal counters of the wrong type are still a %s (%v): the restart check should have cleared them", kind, err)
	}

	sink.mu.Lock()
	defer sink.mu.Unlock()
	alerts := map[string]int{}
	for _, f := range sink.findings {
		if f.Class == reconcile.ClassCorruptRecord {
			alerts[f.SKU]++
		}
	}
	for _, c := range stateCorruptions {
		// Met by the restart check and by the buyer's calls: at most one
		// alert for each, never one per pass or per call.
		if n := alerts[c.sku]; n < 1 || n > 3 {
			t.Errorf("%s alerted %d times as corrupt_record, want once or twice (%v)", c.sku, n, alerts)
		}
	}
}

// waitFirstPass waits until a verifier recorded its first pass.
func waitFirstPass(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var runs int
		err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reconciliation_runs WHERE trigger = 'redis_restart'`).Scan(&runs)
		if err == nil && runs > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the verifier recorded no pass within 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestADriftIsRepairedBesideACorruptSKU plants a drift on one SKU while
// another's stock does not parse: one reconciliation repairs the drift and
// restores the damaged SKU, where it used to fail on the damaged one and
// leave the drift alone.
func TestADriftIsRepairedBesideACorruptSKU(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "drifts", 500, 1)
	s.SKU(t, "damaged", 500, 1)
	s.RunProjector(t)
	waitCaughtUp(t, s, "drifts")
	waitCaughtUp(t, s, "damaged")
	if err := s.RedisClient.HSet(ctx, s.Keyspace.SKUKey("drifts"), "stock", 450).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RedisClient.HSet(ctx, s.Keyspace.SKUKey("damaged"), "stock", "abc").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := newReconciler(t, s, &alertSink{}).Run(ctx, reconcile.Options{Repair: true, Trigger: "interval"})
	if err != nil {
		t.Fatalf("a reconciliation with one damaged sku failed: %v", err)
	}
	repaired := map[string]reconcile.Class{}
	for _, f := range rep.Repaired {
		repaired[f.SKU] = f.Class
	}
	if repaired["drifts"] != reconcile.ClassRedisLow || repaired["damaged"] != reconcile.ClassCorruptRecord {
		t.Fatalf("repaired %v (drifts %+v), want drifts as redis_low and damaged as corrupt_record", repaired, rep.Drifts)
	}
	for _, sku := range []string{"drifts", "damaged"} {
		v, err := s.Service.State(ctx, sku)
		if err != nil || v.RedisStock == nil || *v.RedisStock != 500 || v.Status != domain.StatusOpen {
			t.Fatalf("%s after the run: %+v, %v; want 500 in stock and open", sku, v, err)
		}
	}
}

// TestShowingACorruptSKUAnswers503UntilItIsRestored damages a SKU's seq:
// GET /v1/skus/{sku} answers 503, not not_warmed, reports it, and answers
// the ledger's figures once the report's repair restored it.
func TestShowingACorruptSKUAnswers503UntilItIsRestored(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "shown", 40, 1)
	s.RunProjector(t)
	waitCaughtUp(t, s, "shown")
	if err := s.RedisClient.HSet(ctx, s.Keyspace.SKUKey("shown"), "seq", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.State(ctx, "shown"); !errors.Is(err, domain.ErrCorruptRecord) || domain.CodeOf(err) != domain.CodeUnavailable {
		t.Fatalf("GET of a sku whose seq does not read: %v (%s), want 503 unavailable, not not_warmed", err, domain.CodeOf(err))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := s.Service.State(ctx, "shown")
		// While its restore runs, the SKU reads and shows as recovering.
		if err == nil && v.Status != domain.StatusRecovering {
			if v.RedisSeq == nil || *v.RedisSeq != 1 || *v.RedisStock != 40 || v.Status != domain.StatusOpen {
				t.Fatalf("after its restore: %+v, want seq 1, stock 40, open", v)
			}
			return
		}
		if (err != nil && domain.CodeOf(err) != domain.CodeUnavailable) || time.Now().After(deadline) {
			t.Fatalf("GET while the sku is restored: %v, %v; want 503 or recovering, then its figures within 30 s", v.Status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReconcileNamingASKUFindsABadBuyerCount damages one buyer's count,
// which no snapshot reads and only that buyer's purchases meet (no
// purchase meets it here, so the run is the one to find it): a run that
// names the SKU finds it and restores the SKU, and the buyer is judged by
// the ledger's count again.
func TestReconcileNamingASKUFindsABadBuyerCount(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "counted", 100, 2)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("counted", "u1", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	s.RunProjector(t)
	waitCaughtUp(t, s, "counted")
	key, field := s.CountAt(t, "counted", "u1")
	if err := s.RedisClient.HSet(ctx, key, field, "xx").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := newReconciler(t, s, &alertSink{}).Run(ctx, reconcile.Options{SKUs: []string{"counted"}, Repair: true, Trigger: "cli"})
	if err != nil || len(rep.Repaired) != 1 || rep.Repaired[0].Class != reconcile.ClassCorruptRecord || rep.Repaired[0].Key != key {
		t.Fatalf("reconcile --sku counted: %+v, %v; want its buyers' key repaired as corrupt_record", rep.Drifts, err)
	}
	if got, err := s.RedisClient.HGet(ctx, key, field).Result(); err != nil || got != "1" {
		t.Fatalf("u1's count after the repair: %q, %v; want the ledger's 1", got, err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("counted", "u1", 1, "r3")); err != nil {
		t.Fatalf("u1 buys again under the limit: %v", err)
	}
}

// TestACorruptPartitionKeyStopsOnlyItsPartition replaces one partition's
// stream by a string: that partition's SKUs answer 503, the key is alerted
// once however many calls meet it, and a SKU of another partition sells.
func TestACorruptPartitionKeyStopsOnlyItsPartition(t *testing.T) {
	t.Parallel()
	sink := &alertSink{}
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.Alerter = sink }))
	ctx := context.Background()
	damaged, other := "part-a", ""
	for i := 0; other == ""; i++ {
		if sku := fmt.Sprintf("part-%d", i); s.Keyspace.Partition(sku) != s.Keyspace.Partition(damaged) {
			other = sku
		}
	}
	s.SKU(t, damaged, 100, 1)
	s.SKU(t, other, 100, 1)
	stream := s.Keyspace.SKUStreamKey(damaged)
	if err := s.RedisClient.Del(ctx, stream).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RedisClient.Set(ctx, stream, "not-a-stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(damaged, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("a%d", i)))
		if !errors.Is(err, domain.ErrCorruptRecord) || domain.CodeOf(err) != domain.CodeUnavailable {
			t.Fatalf("a purchase over a stream of the wrong type: %v (%s), want 503 unavailable", err, domain.CodeOf(err))
		}
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(other, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("b%d", i))); err != nil {
			t.Fatalf("a purchase of another partition: %v, want a sale", err)
		}
	}
	// A reconciliation checks the other partitions and reports the key.
	rep, err := newReconciler(t, s, sink).Run(ctx, reconcile.Options{Repair: true, Trigger: "interval"})
	if err != nil || rep.Checked == 0 || rep.Unreachable == 0 {
		t.Fatalf("reconciliation: checked %d, unreachable %d, %v; want the other partitions checked, this one not", rep.Checked, rep.Unreachable, err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var named int
	for _, f := range sink.findings {
		if f.Class == reconcile.ClassCorruptRecord && f.Key == stream && f.SKU == "" {
			named++
		}
	}
	// The app's reconciler alerted the purchases' finding; the run's own
	// reconciler reported it once more.
	if named < 1 || named > 2 {
		t.Fatalf("%d alerts name %s, want one per reconciler however many calls met it (%+v)", named, stream, sink.findings)
	}
}
