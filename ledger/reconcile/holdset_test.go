package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestOpenHoldSetDriftIsNamed edits Redis's expiry set or hold records so
// that the open holds differ from the ledger's while the counts still
// agree, one SKU per kind: each is found under its class, names its hold,
// and is reported but left as it is by a repairing run. A SKU with open
// holds on both sides is clean.
func TestOpenHoldSetDriftIsNamed(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	skus := []string{"hs-unknown", "hs-ended", "hs-unindexed", "hs-redis-ended", "hs-honest"}
	for _, sku := range skus {
		s.SKU(t, sku, 10, 2)
	}
	s.RunProjector(t)
	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	reserve := func(sku, user string) string {
		t.Helper()
		seconds := int64(600)
		h, err := s.Inventory.Reserve(ctx, must(domain.NewSKUID(sku)), must(domain.NewUserID(user)), must(domain.NewQuantity(1)),
			must(domain.NewRequestID("req-"+user)), must(cfg.NewHoldTTL(&seconds)), "", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		return h.HoldID
	}
	holds := map[string]string{}
	for _, sku := range skus {
		reserve(sku, sku+"-kept") // an open hold on both sides, never edited
		holds[sku] = reserve(sku, sku+"-edited")
	}
	ended := holds["hs-ended"]
	if _, err := s.Inventory.CancelHold(ctx, must(domain.NewSKUID("hs-ended")), must(domain.NewHoldID(ended)), uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	for _, sku := range skus {
		waitCaughtUp(t, s, sku)
	}

	rdb := s.RedisClient
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	entry := func(sku, id string) string { return sku + " " + id }
	unknown := uuid.NewString()
	// A hold the ledger never reserved, in Redis's expiry set.
	check(rdb.ZAdd(ctx, s.Keyspace.SKUExpiryKey("hs-unknown"), redis.Z{Score: 1, Member: entry("hs-unknown", unknown)}).Err())
	// A hold both sides ended, back in the expiry set.
	check(rdb.ZAdd(ctx, s.Keyspace.SKUExpiryKey("hs-ended"), redis.Z{Score: 1, Member: entry("hs-ended", ended)}).Err())
	// A held hold gone from the expiry set: no sweeper would end it.
	check(rdb.ZRem(ctx, s.Keyspace.SKUExpiryKey("hs-unindexed"), entry("hs-unindexed", holds["hs-unindexed"])).Err())
	// A hold Redis ended by itself (record and expiry set), the ledger not.
	key, field := s.Keyspace.SKUKey("hs-redis-ended"), "hold:"+holds["hs-redis-ended"]
	raw := rdb.HGet(ctx, key, field).Val()
	check(rdb.HSet(ctx, key, field, "cancelled"+strings.TrimPrefix(raw, "held")).Err())
	check(rdb.ZRem(ctx, s.Keyspace.SKUExpiryKey("hs-redis-ended"), entry("hs-redis-ended", holds["hs-redis-ended"])).Err())
	before := rdb.ZRangeWithScores(ctx, s.Keyspace.ExpiryKey(s.Keyspace.Partition("hs-honest")), 0, -1).Val()

	alerts := &alertSink{}
	rep, err := newReconciler(t, s, alerts).Run(ctx, reconcile.Options{Repair: true, Trigger: "test"})
	check(err)
	want := map[string]struct {
		class reconcile.Class
		hold  string
	}{
		"hs-unknown":     {reconcile.ClassHoldRedisOnly, unknown},
		"hs-ended":       {reconcile.ClassHoldRedisOnly, ended},
		"hs-unindexed":   {reconcile.ClassHoldLedgerOnly, holds["hs-unindexed"]},
		"hs-redis-ended": {reconcile.ClassHoldLedgerOnly, holds["hs-redis-ended"]},
	}
	if got := classes(rep); len(got) != len(want) {
		t.Fatalf("findings %v, want one for each of %v", got, want)
	}
	for _, f := range rep.Drifts {
		w, ok := want[f.SKU]
		if !ok || f.Class != w.class || !strings.Contains(f.Detail, w.hold) || !strings.HasPrefix(f.Detail, "1 holds") {
			t.Errorf("finding %s %s %q, want class %s naming hold %s", f.SKU, f.Class, f.Detail, w.class, w.hold)
		}
		if f.Repaired {
			t.Errorf("finding %s %s was repaired; hold drift is reported only", f.SKU, f.Class)
		}
	}
	if len(alerts.findings) != len(want) || len(rep.Repaired) != 0 {
		t.Fatalf("alerted %d, repaired %d; want %d, 0", len(alerts.findings), len(rep.Repaired), len(want))
	}
	after := rdb.ZRangeWithScores(ctx, s.Keyspace.ExpiryKey(s.Keyspace.Partition("hs-honest")), 0, -1).Val()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("a reporting run changed the expiry set:\n%v\n%v", before, after)
	}
	var stored []string
	rows, err := s.Pool.Query(ctx, `SELECT sku FROM reconciliation_findings WHERE run_id = $1 AND class LIKE 'hold_%' AND detail LIKE '%' || $2 || '%'`,
		rep.RunID, unknown)
	check(err)
	for rows.Next() {
		var sku string
		check(rows.Scan(&sku))
		stored = append(stored, sku)
	}
	check(rows.Err())
	if !slices.Equal(stored, []string{"hs-unknown"}) {
		t.Fatalf("stored findings naming hold %s: %v, want [hs-unknown]", unknown, stored)
	}
}
