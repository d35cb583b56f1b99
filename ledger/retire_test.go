package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// sellOnePerUser sells units units of sku, one to each of units users,
// and returns every receipt by request id.
func sellOnePerUser(t *testing.T, s *stacktest.Stack, sku string, units int) map[string]domain.Receipt {
	t.Helper()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		receipts = make(map[string]domain.Receipt, units)
		sem      = make(chan struct{}, 32)
	)
	for i := range units {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Errorf("deduct %d: %v", i, err)
				return
			}
			mu.Lock()
			receipts[rc.RequestID] = rc
			mu.Unlock()
		})
	}
	wg.Wait()
	return receipts
}

// liveKeys is how many keys sku holds in Redis before it retires: its hash
// alone in one hash (docs/storage.md); in the 1.0 layout its requests
// hash too, and its buyers hash until they are archived.
func liveKeys(t *testing.T, s *stacktest.Stack, sku string, archived bool) int {
	t.Helper()
	if key, _ := s.ReceiptAt(t, sku, ""); key == s.Keyspace.SKUKey(sku) {
		return 1
	}
	if archived {
		return 2
	}
	return 3
}

// skuKeys lists every Redis key that names sku, found by SCAN.
func skuKeys(t *testing.T, s *stacktest.Stack, sku string) []string {
	t.Helper()
	keys, err := s.RedisClient.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, k := range keys {
		if strings.HasSuffix(k, ":"+sku) {
			mine = append(mine, k)
		}
	}
	return mine
}

func tombstoned(t *testing.T, s *stacktest.Stack, sku string) bool {
	t.Helper()
	ok, err := s.RedisClient.SIsMember(context.Background(), s.Keyspace.SKUTombstoneKey(sku), sku).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// catchUp projects every stream entry and trims the streams, as the
// projector and the janitor do once the ledger has caught up: a
// reconciliation then finds nothing in flight.
func catchUp(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	s.ProjectStreams(t)
	for _, stream := range s.Keyspace.StreamKeys() {
		if err := s.RedisClient.XTrimMaxLen(context.Background(), stream, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// soldClosedArchived sells units units of a new sku, one per user, closes
// it and archives its buyers once the ledger has caught up.
func soldClosedArchived(t *testing.T, s *stacktest.Stack, sku string, units int) map[string]domain.Receipt {
	t.Helper()
	ctx := context.Background()
	s.SKU(t, sku, int64(units), 1)
	receipts := sellOnePerUser(t, s, sku, units)
	if _, err := s.Archiver(t).CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	catchUp(t, s)
	if _, err := s.Archiver(t).ArchiveBuyers(ctx, sku); err != nil {
		t.Fatal(err)
	}
	return receipts
}

// fold reads the SKU's ledger fold.
func fold(t *testing.T, s *stacktest.Stack, sku string) *domain.SKUState {
	t.Helper()
	st := domain.NewSKUState(sku)
	if err := s.Ledger.ScanSKU(context.Background(), mustSKU(t, sku), st.Apply); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRetireSKU sells 1,000 units, closes, archives and retires the SKU:
// Redis keeps only its tombstone, the ledger answers retries, purchases
// are refused as closed, warm restocks nothing, and a restore brings the
// SKU back for one release, after which it is archived and retired again.
func TestRetireSKU(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "retire-1"
	s.SKU(t, sku, 1000, 1)
	receipts := sellOnePerUser(t, s, sku, 1000)
	arch := s.Archiver(t)

	if _, err := arch.RetireSKU(ctx, sku); !errors.Is(err, ledger.ErrSKUOpen) {
		t.Fatalf("retire of an open sku: %v, want ErrSKUOpen", err)
	}
	if _, err := arch.CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	if _, err := arch.RetireSKU(ctx, sku); !errors.Is(err, ledger.ErrNotArchived) || domain.CodeOf(err) != domain.CodeConflict {
		t.Fatalf("retire before the archive: %v, want ErrNotArchived", err)
	}
	catchUp(t, s)
	if _, err := arch.ArchiveBuyers(ctx, sku); err != nil {
		t.Fatal(err)
	}
	if len(skuKeys(t, s, sku)) != liveKeys(t, s, sku, true) || tombstoned(t, s, sku) {
		t.Fatalf("refused retirements changed Redis: keys %v", skuKeys(t, s, sku))
	}
	before := fold(t, s, sku)

	res, err := arch.RetireSKU(ctx, sku)
	if err != nil || res.AlreadyRetired || res.Seq != before.Seq {
		t.Fatalf("retire: %+v %v, want retired at seq %d", res, err, before.Seq)
	}
	if keys := skuKeys(t, s, sku); len(keys) != 0 || !tombstoned(t, s, sku) {
		t.Fatalf("after retirement Redis holds %v, tombstoned %v; want only the tombstone", keys, tombstoned(t, s, sku))
	}
	if again, err := arch.RetireSKU(ctx, sku); err != nil || !again.AlreadyRetired || again.Seq != res.Seq {
		t.Fatalf("retire again: %+v %v", again, err)
	}

	// A retry of each of 100 old request ids gets its original receipt.
	n := 0
	for req, rc := range receipts {
		if n++; n > 100 {
			break
		}
		got, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, rc.User, 1, req))
		if err != nil || !got.Replayed || got.Seq != rc.Seq || got.Remaining != rc.Remaining || got.EventID != rc.EventID {
			t.Fatalf("retry of %s: %+v %v, want the receipt %+v", req, got, err, rc)
		}
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "u1", 2, "r1")); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("retry with another qty: %v, want ErrConflict", err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "newcomer", 1, "new")); domain.CodeOf(err) != domain.CodeClosed {
		t.Fatalf("new purchase of a retired sku: %v, want closed", err)
	}
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, "u1", "r1", "")); domain.CodeOf(err) != domain.CodeRetired ||
		!strings.Contains(err.Error(), "restore-redis --sku "+sku) {
		t.Fatalf("release of a retired sku: %v, want retired naming restore-redis", err)
	}
	if _, err := s.Service.Warm(ctx, sku); !errors.Is(err, domain.ErrNeedsRestore) {
		t.Fatalf("warm of a retired sku: %v, want ErrNeedsRestore", err)
	}
	if after := fold(t, s, sku); after.Seq != before.Seq || after.Stock != before.Stock {
		t.Fatalf("the ledger moved after retirement: seq %d stock %d, was %d %d", after.Seq, after.Stock, before.Seq, before.Stock)
	}
	if v, err := s.Service.State(ctx, sku); err != nil || v.Status != domain.StatusRetired || v.LedgerSeq == nil || *v.LedgerSeq != before.Seq {
		t.Fatalf("state of a retired sku: %+v %v", v, err)
	}
	page, err := s.App.Catalog.List(ctx, ledger.SKUListQuery{})
	if err != nil || len(page.SKUs) != 1 || page.SKUs[0].Status != domain.StatusRetired {
		t.Fatalf("list: %+v %v", page, err)
	}
	rep, err := s.App.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{sku}, Trigger: "cli"})
	if err != nil || len(rep.Drifts) != 0 || rep.Checked != 1 {
		t.Fatalf("reconcile of a retired sku: %+v %v, want ok", rep, err)
	}
	if len(skuKeys(t, s, sku)) != 0 {
		t.Fatal("a refusal recreated a key of the retired sku")
	}

	// restore-redis --sku reopens it for releases, once.
	if err := s.Recovery(t).RestoreSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	if tombstoned(t, s, sku) {
		t.Fatal("the restored sku kept its tombstone")
	}
	if v, err := s.Service.State(ctx, sku); err != nil || v.Status != domain.StatusClosed {
		t.Fatalf("state after the restore: %+v %v", v, err)
	}
	rc := receipts["r7"]
	rel, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, rc.User, "r7", "refund"))
	if err != nil || rel.AlreadyReleased {
		t.Fatalf("release after the restore: %+v %v", rel, err)
	}
	if again, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, rc.User, "r7", "refund")); err != nil || !again.AlreadyReleased || again.Seq != rel.Seq {
		t.Fatalf("release again: %+v %v, want the first release", again, err)
	}

	// Archived again as a second version, then retired again.
	catchUp(t, s)
	if _, err := arch.RetireSKU(ctx, sku); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire with a stale archive: %v, want ErrNotArchived", err)
	}
	arc, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil || arc.AlreadyArchived || arc.Seq != before.Seq+1 || arc.Buyers != 999 {
		t.Fatalf("archive after the release: %+v %v, want 999 buyers at seq %d", arc, err, before.Seq+1)
	}
	var versions int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM buyer_archives WHERE sku = $1`, sku).Scan(&versions); err != nil || versions != 2 {
		t.Fatalf("archive versions: %d %v, want 2", versions, err)
	}
	if res, err := arch.RetireSKU(ctx, sku); err != nil || res.AlreadyRetired || res.Seq != before.Seq+1 {
		t.Fatalf("retire again after the restore: %+v %v", res, err)
	}
	if keys := skuKeys(t, s, sku); len(keys) != 0 || !tombstoned(t, s, sku) {
		t.Fatalf("after the second retirement Redis holds %v", keys)
	}
	if got, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, rc.User, 1, "r7")); err != nil || !got.Released || got.Seq != rc.Seq {
		t.Fatalf("retry of a released request: %+v %v, want its receipt marked released", got, err)
	}
	var ops int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE sku = $1 AND action = 'retire'`, sku).Scan(&ops); err != nil || ops != 2 {
		t.Fatalf("retire operations: %d %v, want 2", ops, err)
	}
}

// releaseFirst releases one deduction before the first retirement reaches
// Redis: the late write a retirement must not lose.
type releaseFirst struct {
	ledger.InventoryArchiver
	once    sync.Once
	release func()
}

func (r *releaseFirst) Retire(ctx context.Context, sku domain.SKUID, seq int64) (bool, error) {
	r.once.Do(r.release)
	return r.InventoryArchiver.Retire(ctx, sku, seq)
}

// TestRetireLosesNoLateWrite: a release that lands between retirement's
// checks and its Redis step makes the compare-and-set refuse, changing
// nothing; once the ledger has the release and the buyers are archived
// again, the next attempt retires the SKU.
func TestRetireLosesNoLateWrite(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "retire-race"
	receipts := soldClosedArchived(t, s, sku, 50)
	late := &releaseFirst{InventoryArchiver: s.InventoryArchiver, release: func() {
		if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, receipts["r3"].User, "r3", "late refund")); err != nil {
			t.Errorf("late release: %v", err)
		}
	}}
	arch, err := ledger.NewArchiver(ledger.ArchiverConfig{Ledger: s.Ledger, SKUs: s.SKUs, Inventory: s.Inventory, Redis: late,
		Archives: s.Archives, Operations: s.Operations, Reconcile: s.App.ReconcileClean})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := arch.RetireSKU(ctx, sku); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire raced by a release: %v, want a refusal that asks for the archive again", err)
	}
	if tombstoned(t, s, sku) || len(skuKeys(t, s, sku)) != liveKeys(t, s, sku, true) {
		t.Fatalf("the refused retirement changed Redis: %v", skuKeys(t, s, sku))
	}
	live, err := s.Inventory.State(ctx, mustSKU(t, sku))
	if err != nil || live.Stock != 1 {
		t.Fatalf("after the late release: %+v %v, want its unit back in stock", live, err)
	}
	if _, err := arch.ArchiveBuyers(ctx, sku); !errors.Is(err, ledger.ErrLedgerBehind) {
		t.Fatalf("archive before the release is projected: %v, want ErrLedgerBehind", err)
	}
	catchUp(t, s)
	if _, err := arch.ArchiveBuyers(ctx, sku); err != nil {
		t.Fatal(err)
	}
	res, err := arch.RetireSKU(ctx, sku)
	if err != nil || res.Seq != live.Seq {
		t.Fatalf("retire after the release is archived: %+v %v, want retired at seq %d", res, err, live.Seq)
	}
	if f := fold(t, s, sku); f.Seq != live.Seq || f.Stock != 1 {
		t.Fatalf("ledger fold %d/%d, want seq %d stock 1: the late release was lost", f.Seq, f.Stock, live.Seq)
	}
}

// TestRetireCompletesWhatRedisDid: a retirement that stopped after its
// Redis step (the process died) is completed by the next run, which finds
// the tombstone and records the retirement at the archive's seq.
func TestRetireCompletesWhatRedisDid(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "retire-half"
	soldClosedArchived(t, s, sku, 5)
	arch := s.Archiver(t)
	// seq 7: stocked, 5 deductions, closed.
	if _, err := s.InventoryArchiver.Retire(ctx, mustSKU(t, sku), 6); !errors.Is(err, ledger.ErrSeqMoved) {
		t.Fatalf("retire at a stale seq: %v, want ErrSeqMoved", err)
	}
	if already, err := s.InventoryArchiver.Retire(ctx, mustSKU(t, sku), 7); err != nil || already {
		t.Fatalf("the Redis step alone: %v %v", already, err)
	}
	if rec, err := s.SKUs.Record(ctx, mustSKU(t, sku)); err != nil || rec.Retired != nil {
		t.Fatalf("SQL before the rerun: %+v %v, want not retired yet", rec, err)
	}
	res, err := arch.RetireSKU(ctx, sku)
	if err != nil || res.Seq != 7 || res.AlreadyRetired {
		t.Fatalf("rerun: %+v %v, want the retirement recorded at seq 7", res, err)
	}
	if rec, err := s.SKUs.Record(ctx, mustSKU(t, sku)); err != nil || rec.Retired == nil || rec.Retired.Seq != 7 {
		t.Fatalf("SQL after the rerun: %+v %v", rec, err)
	}

	// Redis loses everything: the reconciler's repair and restore-redis
	// --all put the tombstone back, and neither brings the SKU back.
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := s.App.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{sku}, Repair: true, Trigger: "cli"})
	if err != nil || len(rep.Repaired) != 1 || rep.Repaired[0].Class != reconcile.ClassRedisMissing {
		t.Fatalf("reconcile after the wipe: %+v %v, want the tombstone repaired", rep, err)
	}
	if len(skuKeys(t, s, sku)) != 0 || !tombstoned(t, s, sku) {
		t.Fatal("the repair brought the retired sku back")
	}
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	report, err := s.Recovery(t).RestoreAll(ctx, nil)
	if err != nil || report.Retired != 1 || report.SKUs != 1 {
		t.Fatalf("restore --all: %+v %v, want the retired sku tombstoned", report, err)
	}
	if len(skuKeys(t, s, sku)) != 0 || !tombstoned(t, s, sku) {
		t.Fatal("restore --all brought the retired sku back")
	}
}

// TestRetireClosedRetiresOnlySalesClosedLongEnough: the janitor's pass
// archives and retires the sales closed long enough ago, and leaves the
// open ones and the recent ones alone.
func TestRetireClosedRetiresOnlySalesClosedLongEnough(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	for _, sku := range []string{"rc-open", "rc-closed"} {
		s.SKU(t, sku, 5, 1)
		sellOnePerUser(t, s, sku, 5)
	}
	arch := s.Archiver(t)
	if _, err := arch.CloseSKU(ctx, "rc-closed"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, s)
	if res, err := arch.RetireClosed(ctx, time.Hour); err != nil || len(res) != 0 {
		t.Fatalf("retire of sales closed an hour ago: %+v %v, want none", res, err)
	}
	res, err := arch.RetireClosed(ctx, 0)
	if err != nil || len(res) != 1 || res[0].SKU != "rc-closed" || res[0].Seq != 7 { // 5 sales between stocked and closed
		t.Fatalf("retire of every closed sale: %+v %v, want rc-closed at seq 7", res, err)
	}
	if !tombstoned(t, s, "rc-closed") || len(skuKeys(t, s, "rc-closed")) != 0 || len(skuKeys(t, s, "rc-open")) != liveKeys(t, s, "rc-open", false) {
		t.Fatalf("after the pass: rc-closed keys %v, rc-open keys %v", skuKeys(t, s, "rc-closed"), skuKeys(t, s, "rc-open"))
	}
	if res, err := arch.RetireClosed(ctx, 0); err != nil || len(res) != 0 {
		t.Fatalf("second pass: %+v %v, want nothing left", res, err)
	}
}
