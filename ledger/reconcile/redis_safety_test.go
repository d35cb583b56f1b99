package reconcile_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// commandLog is a go-redis hook that records every command sent, pipelined
// or not, as its lower-case arguments joined by spaces.
type commandLog struct {
	mu   sync.Mutex
	cmds []string
}

func (l *commandLog) record(cmds ...redis.Cmder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range cmds {
		args := make([]string, len(c.Args()))
		for i, a := range c.Args() {
			args[i] = fmt.Sprint(a)
		}
		l.cmds = append(l.cmds, strings.ToLower(strings.Join(args, " ")))
	}
}

func (l *commandLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *commandLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { l.record(cmd); return next(ctx, cmd) }
}

func (l *commandLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { l.record(cmds...); return next(ctx, cmds) }
}

// with returns the recorded commands whose name is name.
func (l *commandLog) with(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.cmds {
		if strings.HasPrefix(c, name+" ") || c == name {
			out = append(out, c)
		}
	}
	return out
}

// TestReconcilerReportsMissingReceipts: Redis evicting (or losing) a SKU's
// requests hash makes retries buy again; the reconciler must notice it even
// while nothing else differs, and repair restores the receipts.
func TestReconcilerReportsMissingReceipts(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "evicted", 20, 1)
	s.SKU(t, "kept", 20, 1)
	s.RunProjector(t)
	for _, sku := range []string{"evicted", "kept"} {
		buy(t, s, sku, 3)
		waitCaughtUp(t, s, sku)
	}
	dropRecords(t, s, "evicted", true)
	rec := newReconciler(t, s, &alertSink{})
	rep, err := rec.Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(classes(rep)); got != "map[evicted:[receipts_missing]]" {
		t.Fatalf("findings %s, want receipts_missing for evicted only", got)
	}
	f := rep.Drifts[0]
	if f.Before.RedisReceipts == nil || *f.Before.RedisReceipts != 0 || f.Before.LedgerDeductions != 3 {
		t.Fatalf("figures %+v, want 0 receipts against 3 deductions", f.Before)
	}

	rep, err = rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
	if err != nil || len(rep.Repaired) != 1 {
		t.Fatalf("repair: %v, %+v", err, rep)
	}
	// The first buyer's retry is answered with the original receipt again.
	rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("evicted", "evicted-u0", 1, "evicted-u0"))
	if err != nil || rc.Seq != 2 {
		t.Fatalf("retry after repair: %+v, %v; want the original receipt at seq 2", rc, err)
	}
}

// TestReconcileDuringPostgresOutageReadsNoRedis: with PostgreSQL down a
// reconciliation cannot finish, so it must fail fast as unavailable before
// it reads the (growing) unacked tail from Redis.
func TestReconcileDuringPostgresOutageReadsNoRedis(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.WithPrivatePostgres())
	ctx := context.Background()
	s.SKU(t, "outage", 100, 1)
	buy(t, s, "outage", 20)
	rec := newReconciler(t, s, &alertSink{})
	log := &commandLog{}
	s.RedisClient.AddHook(log)
	if err := s.Postgres.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Postgres.Start(context.Background()) })

	start := time.Now()
	_, err := rec.Run(ctx, reconcile.Options{SKUs: []string{"outage"}, Trigger: "test"})
	if code := domain.CodeOf(err); code != domain.CodeUnavailable {
		t.Fatalf("run during the outage: %v (%s), want unavailable", err, code)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("run took %s to fail", took)
	}
	if got := append(log.with("xrange"), log.with("multi")...); len(got) > 0 {
		t.Fatalf("the run read Redis although PostgreSQL was down: %v", got)
	}
}

// TestReconcileBoundsTheTailRead: a partition whose unacked tail is longer
// than the bound is read with XRANGE ... COUNT inside the MULTI, and its
// SKUs are reported lagging, never drift, and not stamped verified.
func TestReconcileBoundsTheTailRead(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "backlog", 100, 1)
	buy(t, s, "backlog", 10) // no projector: 11 entries unacked
	source, err := s.NewReconcileSource(5)
	if err != nil {
		t.Fatal(err)
	}
	restorer, rebuilder := recoveryFor(t, s)
	rec, err := reconcile.New(reconcile.Config{Inventory: source, Ledger: s.Snapshots, SKUs: s.SKUs, Restorer: restorer,
		Rebuilder: rebuilder, Runs: s.Reconciliations, Alerts: &alertSink{},
		Metrics: reconcile.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	log := &commandLog{}
	s.RedisClient.AddHook(log)
	rep, err := rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 0 || rep.Lagging != 1 || len(rep.Repaired) != 0 {
		t.Fatalf("report %+v, want backlog lagging and no drift", rep)
	}
	xr := log.with("xrange")
	if len(xr) == 0 {
		t.Fatal("no XRANGE sent")
	}
	for _, c := range xr {
		if !strings.HasSuffix(c, " count 6") {
			t.Fatalf("XRANGE without the bound: %q", c)
		}
	}
}

// secondReadFails answers the reconciler's first Snapshot and refuses every
// later one as unavailable, as a Redis master killed between the
// reconciler's two reads of a SKU does.
type secondReadFails struct {
	reconcile.Inventory
	reads atomic.Int32
}

func (s *secondReadFails) Snapshot(ctx context.Context, skus []domain.SKUID) (reconcile.Snapshot, error) {
	if s.reads.Add(1) > 1 {
		return reconcile.Snapshot{}, fmt.Errorf("%w: the master went away", domain.ErrUnavailable)
	}
	return s.Inventory.Snapshot(ctx, skus)
}

// TestASKUWhoseRedisLeavesBetweenTheTwoReadsIsNotChecked: a SKU whose Redis
// seems behind the ledger is read again before anything is reported; when
// Redis does not answer that second read, one read cannot tell a loss from
// a sale in between, so the SKU counts as not reached, not as drift.
func TestASKUWhoseRedisLeavesBetweenTheTwoReadsIsNotChecked(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "behind", 20, 1)
	s.RunProjector(t)
	buy(t, s, "behind", 3)
	waitCaughtUp(t, s, "behind")
	// Redis forgets its last two sales.
	if err := s.RedisClient.HSet(ctx, s.Keyspace.SKUKey("behind"), "seq", 2, "stock", 19).Err(); err != nil {
		t.Fatal(err)
	}
	flaky := &secondReadFails{Inventory: s.ReconcileSource}
	rep, err := newReconciler(t, s, &alertSink{}, func(c *reconcile.Config) { c.Inventory = flaky }).
		Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 0 || rep.Checked != 0 || rep.Unreachable != 1 {
		t.Fatalf("drifts %v, checked %d, unreachable %d; want no drift and the SKU not reached", classes(rep), rep.Checked, rep.Unreachable)
	}
	// With Redis answering both reads the loss is reported.
	rep, err = newReconciler(t, s, &alertSink{}).Run(ctx, reconcile.Options{Trigger: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(classes(rep)); got != "map[behind:[redis_behind]]" {
		t.Fatalf("findings %s, want redis_behind", got)
	}
}
