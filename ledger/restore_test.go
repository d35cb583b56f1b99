package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections"
)

// sell runs attempts purchases by users distinct users on sku, 64 at a time:
// retries of the same request, second purchases and every seventh success
// released. qty gives each attempt's quantity.
func sell(t *testing.T, s *stacktest.Stack, sku string, users, attempts int, qty func(i int) int64) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range attempts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := i % users
			cmd := ledger.MustDeductCommand(sku, fmt.Sprintf("u%d", u), qty(i), fmt.Sprintf("r%d-%d", u, i%3))
			rc, err := s.Service.Deduct(ctx, cmd)
			switch {
			case err == nil && rc.Seq%7 == 0:
				if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, cmd.User.String(), cmd.RequestID.String(), "payment timeout")); err != nil {
					t.Errorf("release: %v", err)
				}
			case err == nil, errors.Is(err, domain.ErrSoldOut), errors.Is(err, domain.ErrAlreadyPurchased),
				errors.Is(err, domain.ErrConflict): // the same request id with another qty
			default:
				t.Errorf("deduct %+v: %v", cmd, err)
			}
		})
	}
	wg.Wait()
}

// redisSKU is what Redis holds for one SKU, minus the fence stamp, which a
// restore renews by design: its hash's other fields, and its buyers'
// counts and receipts wherever its layout keeps them (a one-hash SKU's u:
// and r: fields, or the buyers and requests hashes of the 1.0 layout).
type redisSKU struct {
	hash     map[string]string
	buyers   map[string]string
	requests map[string]string
}

// readRedisSKU reads sku as redisSKU. It fails the test when a one-hash
// SKU holds records in the 1.0 hashes too, or counts its own wrongly.
func readRedisSKU(t *testing.T, s *stacktest.Stack, sku string) redisSKU {
	t.Helper()
	ctx := context.Background()
	hash, err := s.RedisClient.HGetAll(ctx, s.Keyspace.SKUKey(sku)).Result()
	if err != nil {
		t.Fatal(err)
	}
	delete(hash, "fence")
	buyers, err := s.RedisClient.HGetAll(ctx, s.Keyspace.BuyersKey(sku)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// A receipt is one string in a fixed field order, so a restored one
	// must be byte for byte the one the purchase wrote.
	requests, err := s.RedisClient.HGetAll(ctx, s.Keyspace.RequestsKey(sku)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if hash["layout"] == "" {
		return redisSKU{hash: hash, buyers: buyers, requests: requests}
	}
	if len(buyers)+len(requests) > 0 {
		t.Fatalf("one-hash sku %s has %d buyers and %d requests in the 1.0 hashes", sku, len(buyers), len(requests))
	}
	for field, v := range hash {
		if req, ok := strings.CutPrefix(field, "r:"); ok {
			requests[req] = v
			delete(hash, field)
		} else if user, ok := strings.CutPrefix(field, "u:"); ok {
			buyers[user] = v
			delete(hash, field)
		}
	}
	if hash["receipts"] != strconv.Itoa(len(requests)) || hash["buyers"] != strconv.Itoa(len(buyers)) {
		t.Fatalf("one-hash sku %s counts %s receipts and %s buyers, holds %d and %d",
			sku, hash["receipts"], hash["buyers"], len(requests), len(buyers))
	}
	return redisSKU{hash: hash, buyers: buyers, requests: requests}
}

func assertSameRedisSKU(t *testing.T, sku string, before, after redisSKU) {
	t.Helper()
	if !reflect.DeepEqual(before.hash, after.hash) {
		t.Fatalf("%s: sku hash\nbefore %v\nafter  %v", sku, before.hash, after.hash)
	}
	if !reflect.DeepEqual(before.buyers, after.buyers) {
		t.Fatalf("%s: buyers differ: %d before, %d after", sku, len(before.buyers), len(after.buyers))
	}
	if len(before.requests) != len(after.requests) {
		t.Fatalf("%s: %d requests before, %d after", sku, len(before.requests), len(after.requests))
	}
	for id, r := range before.requests {
		if r != after.requests[id] {
			t.Fatalf("%s: receipt of %s\nbefore %v\nafter  %v", sku, id, r, after.requests[id])
		}
	}
}

// TestRestoreRedisFromTheLedgerAfterAWipe sells with releases, closes one
// SKU, lets the projector catch up, wipes Redis, and restores it from the
// ledger while purchases keep arriving: every SKU's state, buyers and
// receipts come back identical, retries get their original receipts, past
// buyers are still refused, and the sale and its projection go on.
func TestRestoreRedisFromTheLedgerAfterAWipe(t *testing.T) {
	t.Parallel()
	forEachSKULayout(t, testRestoreRedisFromTheLedgerAfterAWipe)
}

// skuLayouts are the layouts of a SKU's records in Redis (the --sku-layout
// of the application), each with its own stack's configuration.
var skuLayouts = []struct {
	name   string
	config func(*app.Config)
}{
	{"one-hash", func(c *app.Config) { c.SKULayout = "one-hash" }},
	{"three-hashes", func(c *app.Config) { c.SKULayout = "three-hashes" }},
}

// forEachSKULayout runs test, in parallel, on a stack of each layout,
// which it names as a SKU hash's layout field does ("" for the 1.0
// layout, which has none).
func forEachSKULayout(t *testing.T, test func(t *testing.T, s *stacktest.Stack, layout string)) {
	t.Helper()
	for _, layout := range skuLayouts {
		t.Run(layout.name, func(t *testing.T) {
			t.Parallel()
			field := layout.name
			if field == "three-hashes" {
				field = ""
			}
			test(t, stacktest.New(t, stacktest.WithAppConfig(layout.config)), field)
		})
	}
}

func testRestoreRedisFromTheLedgerAfterAWipe(t *testing.T, s *stacktest.Stack, layout string) {
	ctx := context.Background()
	skus := []string{"rs-big", "rs-small", "rs-closed", "rs-live"}
	s.SKU(t, "rs-big", 300, 2)
	s.SKU(t, "rs-small", 40, 1)
	s.SKU(t, "rs-closed", 30, 1)
	s.SKU(t, "rs-live", 1000, 1)
	s.RunProjector(t)

	sell(t, s, "rs-big", 250, 800, func(i int) int64 { return int64(1 + i%2) })
	sell(t, s, "rs-small", 100, 200, func(int) int64 { return 1 })
	sell(t, s, "rs-closed", 20, 40, func(int) int64 { return 1 })
	sell(t, s, "rs-live", 50, 50, func(int) int64 { return 1 })
	if _, err := s.Archiver(t).CloseSKU(ctx, "rs-closed"); err != nil {
		t.Fatal(err)
	}
	before := map[string]redisSKU{}
	for _, sku := range skus {
		s.WaitProjected(t, sku, 30*time.Second)
		before[sku] = readRedisSKU(t, s, sku)
	}

	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Warm(ctx, "rs-big"); !errors.Is(err, domain.ErrNeedsRestore) {
		t.Fatalf("warm after the wipe: %v, want ErrNeedsRestore", err)
	}

	// Purchases keep arriving during the restore: they must be refused as
	// not warmed or recovering until their SKU is complete, then succeed.
	stopBuying := make(chan struct{})
	var bought atomic.Int64
	var buyers sync.WaitGroup
	buyers.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopBuying:
				return
			default:
			}
			_, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rs-live", fmt.Sprintf("late-%d", i), 1, fmt.Sprintf("late-%d", i)))
			switch {
			case err == nil:
				bought.Add(1)
			case errors.Is(err, domain.ErrNotWarmed), errors.Is(err, domain.ErrRecovering):
				time.Sleep(time.Millisecond) // pace the refused attempts; the restore needs the CPU
			default:
				t.Errorf("deduct during restore: %v", err)
				return
			}
		}
	})

	var calls []int
	report, err := s.Recovery(t).RestoreAll(ctx, func(done, total int, rows int64) {
		if total != len(skus) || (len(calls) > 0 && done < calls[len(calls)-1]) {
			t.Errorf("progress %d/%d after %v", done, total, calls)
		}
		calls = append(calls, done)
	})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	var rows int64
	for _, sku := range skus {
		n, _ := strconv.ParseInt(before[sku].hash["seq"], 10, 64)
		rows += n
	}
	if report.SKUs != len(skus) || report.Rows != rows || report.Skipped != 0 || len(report.Failed) != 0 {
		t.Fatalf("report %+v, want %d skus and %d rows", report, len(skus), rows)
	}
	if len(calls) == 0 || calls[len(calls)-1] != len(skus) {
		t.Fatalf("progress calls %v, want to end at %d", calls, len(skus))
	}
	// Let some purchases land on the restored SKU, then stop buying.
	deadline := time.Now().Add(5 * time.Second)
	for bought.Load() < 10 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(stopBuying)
	buyers.Wait()
	if bought.Load() < 10 {
		t.Fatalf("only %d purchases succeeded after the restore", bought.Load())
	}

	for _, sku := range []string{"rs-big", "rs-small", "rs-closed"} {
		if before[sku].hash["layout"] != layout {
			t.Fatalf("%s sold in layout %q, want %q", sku, before[sku].hash["layout"], layout)
		}
		assertSameRedisSKU(t, sku, before[sku], readRedisSKU(t, s, sku))
		st, err := s.Inventory.State(ctx, mustSKU(t, sku))
		if err != nil || !st.Verified {
			t.Fatalf("%s after restore: %+v %v, want verified", sku, st, err)
		}
	}

	// A buyer who holds the limit is still refused; a retry of an old
	// request gets its original receipt; a repeated release reports the
	// original release.
	big := before["rs-big"]
	var holder string
	for _, u := range slices.Sorted(maps.Keys(big.buyers)) {
		if big.buyers[u] == "2" {
			holder = u
			break
		}
	}
	if holder == "" {
		t.Fatal("no buyer holds the limit of 2; the sale is too small")
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rs-big", holder, 1, "after-restore")); !errors.Is(err, domain.ErrAlreadyPurchased) {
		t.Fatalf("past buyer %s after restore: %v, want ErrAlreadyPurchased", holder, err)
	}
	var retried, rereleased bool
	for _, id := range slices.Sorted(maps.Keys(big.requests)) {
		r, err := stacktest.ParseReceipt(big.requests[id])
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case r.Released && !rereleased:
			rel, err := s.Service.Release(ctx, ledger.MustReleaseCommand("rs-big", r.User, id, ""))
			if err != nil || !rel.AlreadyReleased || rel.EventID != r.ReleaseEventID || rel.Seq != r.ReleaseSeq {
				t.Fatalf("release of %s again: %+v %v, want the original release %+v", id, rel, err, r)
			}
			rereleased = true
		case !r.Released && !retried:
			rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rs-big", r.User, r.Qty, id))
			if err != nil || rc.EventID != r.EventID || rc.Seq != r.Seq || rc.Remaining != r.Remaining {
				t.Fatalf("retry of %s: %+v %v, want the original receipt %+v", id, rc, err, r)
			}
			retried = true
		}
	}
	if !retried || !rereleased {
		t.Fatalf("found a held request: %v, a released one: %v", retried, rereleased)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rs-closed", "newcomer", 1, "n1")); !errors.Is(err, domain.ErrClosed) {
		t.Fatalf("deduct on the closed sku after restore: %v, want ErrClosed", err)
	}

	// The sale goes on where it stopped, and the projector, whose stream and
	// group the wipe took, projects it.
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand("rs-big", holder, anyHeldRequest(t, big, holder), "")); err != nil {
		t.Fatalf("release after restore: %v", err)
	}
	rc, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rs-big", holder, 1, "after-release"))
	if err != nil {
		t.Fatalf("deduct after restore: %v", err)
	}
	if seq, _ := strconv.ParseInt(big.hash["seq"], 10, 64); rc.Seq != seq+2 {
		t.Fatalf("seq after restore %d, want %d", rc.Seq, seq+2)
	}
	for _, sku := range skus {
		groups, err := s.RedisClient.XInfoGroups(ctx, s.Keyspace.SKUStreamKey(sku)).Result()
		if err != nil || len(groups) != 1 || groups[0].Name != projections.ConsumerGroup {
			t.Fatalf("groups of %s's stream: %v %v", sku, groups, err)
		}
	}
	for _, sku := range []string{"rs-big", "rs-live"} {
		waitLedgerSeq(t, s, sku)
	}
}

func TestWarmAfterAWipeRefusesAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "wipe-1", 10, 1)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("wipe-1", "u", 1, "r")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Warm(ctx, "wipe-1"); !errors.Is(err, domain.ErrNeedsRestore) {
		t.Fatalf("warm after the wipe: %v, want ErrNeedsRestore", err)
	}
	if n, err := s.RedisClient.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("refused warm left %d keys (%v)", n, err)
	}
	if err := s.Recovery(t).RestoreSKU(ctx, "wipe-1"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Service.Warm(ctx, "wipe-1")
	if err != nil || res.Stocked || res.State.Stock != 9 || res.State.Seq != 2 {
		t.Fatalf("warm after restore: %+v %v, want a no-op at stock 9 seq 2", res, err)
	}
}

// TestRestoreRefusesWhenRedisIsAhead: events not yet in the ledger would be
// lost by a restore, so it refuses and writes nothing.
func TestRestoreRefusesWhenRedisIsAhead(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "ahead-1", 10, 1)
	s.ProjectStreams(t)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("ahead-1", "u", 1, "r")); err != nil {
		t.Fatal(err)
	}
	before := readRedisSKU(t, s, "ahead-1")
	fence, err := s.RedisClient.HGet(ctx, s.Keyspace.SKUKey("ahead-1"), "fence").Result()
	if err != nil {
		t.Fatal(err)
	}
	err = s.Recovery(t).RestoreSKU(ctx, "ahead-1")
	if !errors.Is(err, ledger.ErrRedisAhead) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("restore with Redis ahead: %v, want ErrRedisAhead", err)
	}
	assertSameRedisSKU(t, "ahead-1", before, readRedisSKU(t, s, "ahead-1"))
	if after, _ := s.RedisClient.HGet(ctx, s.Keyspace.SKUKey("ahead-1"), "fence").Result(); after != fence {
		t.Fatalf("refused restore changed the fence %q -> %q", fence, after)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("ahead-1", "u2", 1, "r2")); err != nil {
		t.Fatalf("deduct after a refused restore: %v", err)
	}

	if err := s.Recovery(t).RestoreSKU(ctx, "never-defined"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("restore of an undefined sku: %v, want ErrNotFound", err)
	}
	if err := s.Recovery(t).RestoreSKU(ctx, "bad{sku}"); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("restore of a malformed sku: %v, want ErrInvalidInput", err)
	}
}

func anyHeldRequest(t *testing.T, r redisSKU, user string) string {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(r.requests)) {
		if p, err := stacktest.ParseReceipt(r.requests[id]); err == nil && p.User == user && !p.Released {
			return id
		}
	}
	t.Fatalf("user %s holds no request", user)
	return ""
}

// waitLedgerSeq waits until the ledger's highest seq of sku equals Redis's.
func waitLedgerSeq(t *testing.T, s *stacktest.Stack, sku string) {
	t.Helper()
	ctx := context.Background()
	st, err := s.Inventory.State(ctx, mustSKU(t, sku))
	if err != nil {
		t.Fatal(err)
	}
	var seq, n, sum int64
	localstacktest.WaitProgress(t, fmt.Sprintf("the ledger of %s to reach Redis's seq %d", sku, st.Seq), 20*time.Second, 3*time.Minute, func() (bool, int64) {
		if err := s.Pool.QueryRow(ctx, `SELECT COALESCE(max(seq), 0), count(*), COALESCE(sum(delta), 0) FROM ledger_entries WHERE sku = $1`, sku).
			Scan(&seq, &n, &sum); err != nil {
			t.Fatal(err)
		}
		return seq == st.Seq && n == st.Seq, n
	})
	if sum != st.Stock {
		t.Fatalf("%s: ledger sums to %d, Redis holds %d", sku, sum, st.Stock)
	}
}

func mustSKU(t testing.TB, s string) domain.SKUID {
	t.Helper()
	id, err := domain.NewSKUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
