package ledger_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// archivedBuyers reads a SKU's buyers back from the archive tables.
func archivedBuyers(t *testing.T, s *stacktest.Stack, sku string) map[string]int64 {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT user_id, qty FROM buyer_archive_entries WHERE sku = $1`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			user string
			qty  int64
		)
		if err := rows.Scan(&user, &qty); err != nil {
			t.Fatal(err)
		}
		out[user] = qty
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ledgerBuyers folds the SKU's ledger into its holders.
func ledgerBuyers(t *testing.T, s *stacktest.Stack, sku string) map[string]int64 {
	t.Helper()
	st := domain.NewSKUState(sku)
	if err := s.Ledger.ScanSKU(context.Background(), mustSKU(t, sku), st.Apply); err != nil {
		t.Fatal(err)
	}
	return st.Buyers
}

// TestCloseAndArchiveBuyers, in both layouts of a SKU's records (the
// buyers hash of the 1.0 layout never exists in the other, so both are
// read where the SKU's layout keeps them too: readRedisSKU).
// plantBuyer writes user's count of qty where sku's layout keeps it,
// counting it in a one-hash SKU as the scripts would: a buyer the ledger
// does not know, in an otherwise sound SKU.
func plantBuyer(t *testing.T, s *stacktest.Stack, sku, user string, qty int64) {
	t.Helper()
	ctx := context.Background()
	key := s.Keyspace.SKUKey(sku)
	layout, err := s.RedisClient.HGet(ctx, key, "layout").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	if layout == "" {
		if err := s.RedisClient.HSet(ctx, s.Keyspace.BuyersKey(sku), user, qty).Err(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if added, err := s.RedisClient.HSet(ctx, key, "u:"+user, qty).Result(); err != nil || added != 1 {
		t.Fatalf("plant %s: %d %v", user, added, err)
	}
	if err := s.RedisClient.HIncrBy(ctx, key, "buyers", 1).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCloseAndArchiveBuyers(t *testing.T) {
	t.Parallel()
	forEachSKULayout(t, testCloseAndArchiveBuyers)
}

func testCloseAndArchiveBuyers(t *testing.T, s *stacktest.Stack, layout string) {
	ctx := context.Background()
	const sku = "arch-1"
	s.SKU(t, sku, 100, 3)
	sell(t, s, sku, 40, 120, func(i int) int64 { return int64(1 + i%3) })
	arch := s.Archiver(t)
	buyersKey := s.Keyspace.BuyersKey(sku)
	sold := readRedisSKU(t, s, sku)
	if sold.hash["layout"] != layout || len(sold.buyers) == 0 {
		t.Fatalf("sold in layout %q to %d buyers, want layout %q", sold.hash["layout"], len(sold.buyers), layout)
	}

	// Open: refused, nothing changes.
	if _, err := arch.ArchiveBuyers(ctx, sku); !errors.Is(err, ledger.ErrSKUOpen) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("archive of an open sku: %v, want ErrSKUOpen", err)
	}
	if !maps.Equal(readRedisSKU(t, s, sku).buyers, sold.buyers) {
		t.Fatal("a refused archive dropped the buyers")
	}

	closed, err := arch.CloseSKU(ctx, sku)
	if err != nil || closed.AlreadyClosed || closed.ClosedAt.IsZero() {
		t.Fatalf("close: %+v %v", closed, err)
	}
	again, err := arch.CloseSKU(ctx, sku)
	if err != nil || !again.AlreadyClosed || !again.ClosedAt.Equal(closed.ClosedAt) {
		t.Fatalf("close again: %+v %v, want already closed at %v", again, err, closed.ClosedAt)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "late", 1, "late")); !errors.Is(err, domain.ErrClosed) {
		t.Fatalf("deduct after close: %v, want ErrClosed", err)
	}
	if v, err := s.Service.State(ctx, sku); err != nil || v.Status != domain.StatusClosed {
		t.Fatalf("state after close: %+v %v", v, err)
	}

	// The ledger has not seen the sale yet: refused.
	if _, err := arch.ArchiveBuyers(ctx, sku); !errors.Is(err, ledger.ErrLedgerBehind) {
		t.Fatalf("archive before projection: %v, want ErrLedgerBehind", err)
	}
	s.ProjectStreams(t)

	redisBuyers := readRedisSKU(t, s, sku).buyers
	if len(redisBuyers) == 0 {
		t.Fatalf("buyers before the archive: %v", redisBuyers)
	}
	res, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 || len(readRedisSKU(t, s, sku).buyers) != 0 {
		t.Fatal("the buyers survived the archive")
	}
	archived := archivedBuyers(t, s, sku)
	var units int64
	for u, q := range redisBuyers {
		if strconv.FormatInt(archived[u], 10) != q {
			t.Fatalf("user %s held %s in Redis, the archive says %d", u, q, archived[u])
		}
		units += archived[u]
	}
	if !maps.Equal(archived, ledgerBuyers(t, s, sku)) || len(archived) != len(redisBuyers) {
		t.Fatalf("archive %v, ledger fold %v, Redis %v", archived, ledgerBuyers(t, s, sku), redisBuyers)
	}
	if res.AlreadyArchived || res.Buyers != len(archived) || res.Units != units {
		t.Fatalf("result %+v, want %d buyers holding %d units", res, len(archived), units)
	}

	// Idempotent, and the sale's receipts and releases still work.
	res2, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil || !res2.AlreadyArchived || res2.Buyers != res.Buyers || !res2.ArchivedAt.Equal(res.ArchivedAt) {
		t.Fatalf("archive again: %+v %v, want the first archive %+v", res2, err, res)
	}
	if _, err := s.Pool.Exec(ctx, `DELETE FROM buyer_archive_entries WHERE sku = $1`, sku); err == nil {
		t.Fatal("archive entries can be deleted")
	}
	var user, req string
	var qty int64
	if err := s.Pool.QueryRow(ctx, `SELECT user_id, request_id, qty FROM ledger_entries e WHERE sku = $1 AND type = 'deducted'
		AND NOT EXISTS (SELECT 1 FROM ledger_entries r WHERE r.sku = e.sku AND r.type = 'released' AND r.request_id = e.request_id)
		ORDER BY seq LIMIT 1`, sku).Scan(&user, &req, &qty); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, user, qty, req)); err != nil {
		t.Fatalf("retry of %s after the archive: %v, want its original receipt", req, err)
	}
	if rel, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, user, req, "")); err != nil || rel.AlreadyReleased {
		t.Fatalf("release after the archive: %+v %v", rel, err)
	}
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 || len(readRedisSKU(t, s, sku).buyers) != 0 {
		t.Fatal("a release after the archive recreated a buyer's count")
	}

	// A restore after a wipe brings the SKU back closed and archived,
	// without its buyers.
	s.ProjectStreams(t)
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Recovery(t).RestoreSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	restored := readRedisSKU(t, s, sku)
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 || len(restored.buyers) != 0 {
		t.Fatal("restore brought archived buyers back")
	}
	hash := restored.hash
	if hash["status"] != "closed" || hash["archived_at"] == "" || hash["closed_at"] != strconv.FormatInt(closed.ClosedAt.UnixMicro(), 10) ||
		hash["layout"] != layout {
		t.Fatalf("sku hash after restore: %v", hash)
	}
}

func TestArchiveClosedArchivesOnlySalesClosedLongEnough(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	for _, sku := range []string{"ac-open", "ac-closed"} {
		s.SKU(t, sku, 10, 1)
		sell(t, s, sku, 5, 5, func(int) int64 { return 1 })
	}
	arch := s.Archiver(t)
	if _, err := arch.CloseSKU(ctx, "ac-closed"); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	if res, err := arch.ArchiveClosed(ctx, time.Hour); err != nil || len(res) != 0 {
		t.Fatalf("archive of sales closed an hour ago: %+v %v, want none", res, err)
	}
	res, err := arch.ArchiveClosed(ctx, 0)
	if err != nil || len(res) != 1 || res[0].SKU != "ac-closed" || res[0].Buyers != 5 {
		t.Fatalf("archive of every closed sale: %+v %v, want ac-closed with 5 buyers", res, err)
	}
	if res, err := arch.ArchiveClosed(ctx, 0); err != nil || len(res) != 0 {
		t.Fatalf("second pass: %+v %v, want nothing left", res, err)
	}
	if n := len(readRedisSKU(t, s, "ac-open").buyers); n != 5 {
		t.Fatalf("the open sale has %d buyers left, want its 5", n)
	}
	if _, err := arch.CloseSKU(ctx, "never-defined"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("close of an undefined sku: %v, want ErrNotFound", err)
	}
}

// TestArchiveTrustsOnlyTheLedger: Redis buyers that differ from the ledger
// are refused; buyers dropped from Redis by a run whose SQL commit failed
// are archived from the ledger fold.
func TestArchiveTrustsOnlyTheLedger(t *testing.T) {
	t.Parallel()
	forEachSKULayout(t, testArchiveTrustsOnlyTheLedger)
}

func testArchiveTrustsOnlyTheLedger(t *testing.T, s *stacktest.Stack, _ string) {
	ctx := context.Background()
	arch := s.Archiver(t)
	for _, sku := range []string{"trust-drift", "trust-dropped"} {
		s.SKU(t, sku, 10, 1)
		sell(t, s, sku, 4, 4, func(int) int64 { return 1 })
		if _, err := arch.CloseSKU(ctx, sku); err != nil {
			t.Fatal(err)
		}
	}
	s.ProjectStreams(t)

	plantBuyer(t, s, "trust-drift", "ghost", 1)
	if _, err := arch.ArchiveBuyers(ctx, "trust-drift"); !errors.Is(err, ledger.ErrBuyersMismatch) {
		t.Fatalf("archive with a ghost buyer: %v, want ErrBuyersMismatch", err)
	}
	if n := len(readRedisSKU(t, s, "trust-drift").buyers); n != 5 {
		t.Fatalf("a refused archive left %d buyers, want all 5", n)
	}

	id := mustSKU(t, "trust-dropped")
	st, err := s.Inventory.State(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InventoryArchiver.DropBuyers(ctx, id, st.Seq-1); !errors.Is(err, ledger.ErrSeqMoved) {
		t.Fatalf("drop at a stale seq: %v, want ErrSeqMoved", err)
	}
	if err := s.InventoryArchiver.DropBuyers(ctx, id, st.Seq); err != nil {
		t.Fatal(err)
	}
	res, err := arch.ArchiveBuyers(ctx, "trust-dropped")
	if err != nil || res.AlreadyArchived || res.Buyers != 4 {
		t.Fatalf("archive after a drop without its record: %+v %v, want 4 buyers archived", res, err)
	}
	if got := archivedBuyers(t, s, "trust-dropped"); !maps.Equal(got, ledgerBuyers(t, s, "trust-dropped")) {
		t.Fatalf("archive %v, ledger %v", got, ledgerBuyers(t, s, "trust-dropped"))
	}
}

// TestArchiveResumesADropStoppedMidway: a one-hash SKU's buyers leave Redis
// a page at a time. A drop that stops midway commits no archive and leaves
// the SKU unfit to retire; the next run archives the ledger's fold (what
// Redis has left is no longer offered as the buyers, so it cannot differ),
// finishes the drop, and the SKU retires.
func TestArchiveResumesADropStoppedMidway(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.WithAppConfig(skuLayouts[0].config))
	ctx := context.Background()
	const sku = "arch-resume"
	s.SKU(t, sku, 1500, 1)
	sellOnePerUser(t, s, sku, 1500)
	arch := s.Archiver(t)
	if _, err := arch.CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	catchUp(t, s)
	if sold := readRedisSKU(t, s, sku); sold.hash["layout"] != "one-hash" || len(sold.buyers) != 1500 {
		t.Fatalf("sold in layout %q to %d buyers, want one-hash and 1,500", sold.hash["layout"], len(sold.buyers))
	}

	failer := stacktest.NewDropPages(s.Keyspace, sku, 2)
	s.RedisClient.AddHook(failer)
	if _, err := arch.ArchiveBuyers(ctx, sku); err == nil {
		t.Fatal("an archive whose drop lost its second page succeeded")
	}
	if n := len(readRedisSKU(t, s, sku).buyers); n == 0 || n == 1500 { // and counted exactly
		t.Fatalf("a drop stopped at its second page left %d of 1,500 buyers, want some gone", n)
	}
	if got := archivedBuyers(t, s, sku); len(got) != 0 {
		t.Fatalf("a drop stopped midway committed an archive of %d buyers", len(got))
	}
	if _, err := arch.RetireSKU(ctx, sku); !errors.Is(err, ledger.ErrNotArchived) {
		t.Fatalf("retire after a drop stopped midway: %v, want ErrNotArchived", err)
	}

	failer.FailAt(0)
	res, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil || res.AlreadyArchived || res.Buyers != 1500 || res.Units != 1500 {
		t.Fatalf("archive after a drop stopped midway: %+v %v, want 1,500 buyers archived now", res, err)
	}
	if got := archivedBuyers(t, s, sku); len(got) != 1500 || !maps.Equal(got, ledgerBuyers(t, s, sku)) {
		t.Fatalf("archived %d buyers, not the ledger's 1,500", len(got))
	}
	after := readRedisSKU(t, s, sku)
	if len(after.buyers) != 0 || after.hash["archived_at"] == "" || after.hash["archiving"] != "" {
		t.Fatalf("after the archive Redis holds %d buyers, sku hash %v", len(after.buyers), after.hash)
	}
	if res, err := arch.RetireSKU(ctx, sku); err != nil || res.AlreadyRetired {
		t.Fatalf("retire: %+v %v", res, err)
	}
	if keys := skuKeys(t, s, sku); len(keys) != 0 || !tombstoned(t, s, sku) {
		t.Fatalf("after retirement Redis holds %v", keys)
	}
}
