package ledger_test

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

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

func TestCloseAndArchiveBuyers(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "arch-1"
	s.SKU(t, sku, 100, 3)
	sell(t, s, sku, 40, 120, func(i int) int64 { return int64(1 + i%3) })
	arch := s.Archiver(t)
	buyersKey := s.Keyspace.BuyersKey(sku)

	// Open: refused, nothing changes.
	if _, err := arch.ArchiveBuyers(ctx, sku); !errors.Is(err, ledger.ErrSKUOpen) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("archive of an open sku: %v, want ErrSKUOpen", err)
	}
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 1 {
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

	redisBuyers, err := s.RedisClient.HGetAll(ctx, buyersKey).Result()
	if err != nil || len(redisBuyers) == 0 {
		t.Fatalf("buyers before the archive: %v %v", redisBuyers, err)
	}
	res, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil {
		t.Fatalf("archive: %v", err)
	}
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 {
		t.Fatal("the buyers key survived the archive")
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
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 {
		t.Fatal("a release after the archive recreated the buyers key")
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
	if n, _ := s.RedisClient.Exists(ctx, buyersKey).Result(); n != 0 {
		t.Fatal("restore brought archived buyers back")
	}
	hash, err := s.RedisClient.HGetAll(ctx, s.Keyspace.SKUKey(sku)).Result()
	if err != nil || hash["status"] != "closed" || hash["archived_at"] == "" || hash["closed_at"] != strconv.FormatInt(closed.ClosedAt.UnixMicro(), 10) {
		t.Fatalf("sku hash after restore: %v %v", hash, err)
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
	if n, _ := s.RedisClient.Exists(ctx, s.Keyspace.BuyersKey("ac-open")).Result(); n != 1 {
		t.Fatal("the open sale's buyers were dropped")
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
	s := stacktest.New(t)
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

	if err := s.RedisClient.HSet(ctx, s.Keyspace.BuyersKey("trust-drift"), "ghost", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := arch.ArchiveBuyers(ctx, "trust-drift"); !errors.Is(err, ledger.ErrBuyersMismatch) {
		t.Fatalf("archive with a ghost buyer: %v, want ErrBuyersMismatch", err)
	}
	if n, _ := s.RedisClient.HLen(ctx, s.Keyspace.BuyersKey("trust-drift")).Result(); n != 5 {
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
