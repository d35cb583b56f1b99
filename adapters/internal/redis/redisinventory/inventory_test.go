package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

type fixture struct {
	srv          *localstack.RedisServer
	client       *redis.Client
	keys         redisinventory.Keyspace
	nodeRunWatch *redisinventory.NodeRunWatch
	inv          *redisinventory.RedisInventory
	// restorer, archiver and reconcile share the client with inv.
	restorer  *redisinventory.RedisRestorer
	archiver  *redisinventory.RedisArchiver
	reconcile *redisinventory.RedisReconcileSource
}

// newFixture warms its SKUs in the keyspace's default layout.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newLayoutFixture(t, "")
}

// skuLayouts are the two places a SKU may keep its receipts and buyers'
// counts (records.lua): the tests of what the scripts do with them run on
// both, as SKUs of the 1.0 layout keep it after an upgrade.
var skuLayouts = []redisinventory.SKULayout{redisinventory.LayoutOneHash, redisinventory.LayoutThreeHashes}

// newLayoutFixture warms its SKUs in layout; "" leaves the keyspace's default.
func newLayoutFixture(t testing.TB, layout redisinventory.SKULayout) *fixture {
	t.Helper()
	srv := localstacktest.Redis(t)
	// As the service's client: a deadline cuts a blocked read.
	opts := &redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true}
	nodeRunWatch := redisinventory.NewNodeRunWatch()
	nodeRunWatch.Attach(opts)
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })
	keys, err := redisinventory.NewKeyspace(redisinventory.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	if layout != "" {
		keys = keys.WithLayout(layout)
	}
	return &fixture{srv: srv, client: client, keys: keys, nodeRunWatch: nodeRunWatch,
		inv:       must(redisinventory.NewRedisInventory(client, keys, redisinventory.InventoryConfig{})),
		restorer:  redisinventory.NewRedisRestorer(client, keys),
		archiver:  redisinventory.NewRedisArchiver(client, keys),
		reconcile: must(redisinventory.NewRedisReconcileSource(client, keys, redisinventory.ReconcileSourceConfig{})),
	}
}

// must unwraps fixtures that cannot fail unless the test itself is wrong.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("test fixture failed: %v", err))
	}
	return v
}

func (f *fixture) warm(t testing.TB, sku string, stock, limit int64) domain.SKUID {
	t.Helper()
	id := must(domain.NewSKUID(sku))
	def := must(domain.NewSKUDefinition(id, stock, limit))
	if _, stocked, err := f.inv.Warm(context.Background(), def, uuid.NewString()); err != nil || !stocked {
		t.Fatalf("warm %s: stocked=%v err=%v", sku, stocked, err)
	}
	return id
}

// forEachLayout runs test, in parallel, on a fixture of each layout.
func forEachLayout(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Helper()
	for _, layout := range skuLayouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			test(t, newLayoutFixture(t, layout))
		})
	}
}

// layoutOf reads the layout sku's hash names for its records.
func (f *fixture) layoutOf(t testing.TB, sku string) redisinventory.SKULayout {
	t.Helper()
	switch v := f.layoutField(t, sku); v {
	case "":
		return redisinventory.LayoutThreeHashes
	case string(redisinventory.LayoutOneHash):
		return redisinventory.LayoutOneHash
	default:
		t.Fatalf("sku %s has layout %q", sku, v)
		return ""
	}
}

// layoutField is sku's hash's layout field as the scripts read it, "" when
// absent (the 1.0 layout).
func (f *fixture) layoutField(t testing.TB, sku string) string {
	t.Helper()
	v, err := redisinventory.LayoutField(context.Background(), f.client, f.keys.SKUKey(sku))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// receiptAt is the key and field of request id req's receipt, where sku's
// layout keeps it, so that a test can read or damage it.
func (f *fixture) receiptAt(t testing.TB, sku, req string) (key, field string) {
	t.Helper()
	return f.keys.ReceiptAt(sku, f.layoutField(t, sku), req)
}

// countAt is the key and field of user's count, where sku's layout keeps it.
func (f *fixture) countAt(t testing.TB, sku, user string) (key, field string) {
	t.Helper()
	return f.keys.CountAt(sku, f.layoutField(t, sku), user)
}

// plantReceipt writes value as req's receipt where sku's layout keeps it,
// counting it as the scripts would in a one-hash SKU, so that a test can
// damage one record and leave the rest of the SKU sound.
func (f *fixture) plantReceipt(t testing.TB, sku, req, value string) {
	t.Helper()
	ctx := context.Background()
	key, field := f.receiptAt(t, sku, req)
	if added := must(f.client.HSet(ctx, key, field, value).Result()); added == 1 && key == f.keys.SKUKey(sku) {
		must(f.client.HIncrBy(ctx, key, "receipts", 1).Result())
	}
}

// records reads sku's receipts by request id and buyers' counts by user,
// wherever its layout keeps them. It fails the test when the other
// layout's place holds any, or when a one-hash SKU's fields receipts and
// buyers, which every script that adds or removes one keeps, miscount them.
func (f *fixture) records(t testing.TB, sku string) (receipts, counts map[string]string) {
	t.Helper()
	ctx := context.Background()
	hash := must(f.client.HGetAll(ctx, f.keys.SKUKey(sku)).Result())
	requests := must(f.client.HGetAll(ctx, f.keys.RequestsKey(sku)).Result())
	buyers := must(f.client.HGetAll(ctx, f.keys.BuyersKey(sku)).Result())
	receipts, counts = map[string]string{}, map[string]string{}
	for field, v := range hash {
		if req, ok := strings.CutPrefix(field, "r:"); ok {
			receipts[req] = v
		} else if user, ok := strings.CutPrefix(field, "u:"); ok {
			counts[user] = v
		}
	}
	if f.layoutOf(t, sku) == redisinventory.LayoutThreeHashes {
		if len(receipts)+len(counts) > 0 || hash["receipts"] != "" || hash["buyers"] != "" {
			t.Fatalf("sku %s of the 1.0 layout holds one-hash records: %v", sku, hash)
		}
		return requests, buyers
	}
	if len(requests)+len(buyers) > 0 {
		t.Fatalf("one-hash sku %s has records in the 1.0 hashes: requests %v, buyers %v", sku, requests, buyers)
	}
	if hash["receipts"] != fmt.Sprint(len(receipts)) || hash["buyers"] != fmt.Sprint(len(counts)) {
		t.Fatalf("one-hash sku %s counts %s receipts and %s buyers, holds %d and %d: %v",
			sku, hash["receipts"], hash["buyers"], len(receipts), len(counts), hash)
	}
	return receipts, counts
}

// snapshot reads every key's value, so a test can prove that a refused
// call wrote nothing anywhere. Unlike a DUMP it does not depend on a hash's
// or a set's internal order, which a mere lookup may change while Redis
// rehashes it incrementally.
func (f *fixture) snapshot(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	snap := map[string]string{}
	for _, k := range must(f.client.Keys(ctx, "*").Result()) {
		switch typ := must(f.client.Type(ctx, k).Result()); typ {
		case "hash":
			snap[k] = fmt.Sprint(must(f.client.HGetAll(ctx, k).Result()))
		case "set":
			members := must(f.client.SMembers(ctx, k).Result())
			slices.Sort(members)
			snap[k] = fmt.Sprint(members)
		case "zset":
			snap[k] = fmt.Sprint(must(f.client.ZRangeWithScores(ctx, k, 0, -1).Result()))
		case "stream":
			snap[k] = fmt.Sprint(must(f.client.XRange(ctx, k, "-", "+").Result()))
		default:
			snap[k] = must(f.client.Dump(ctx, k).Result())
		}
	}
	return snap
}

func assertSame(t *testing.T, before, after map[string]string) {
	t.Helper()
	if len(before) != len(after) {
		t.Fatalf("key count changed: %d -> %d", len(before), len(after))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("key %s changed", k)
		}
	}
}

func deduct(t *testing.T, f *fixture, sku domain.SKUID, user string, qty int64, req, eventID string) (domain.Receipt, error) {
	t.Helper()
	return f.inv.Deduct(context.Background(), sku, must(domain.NewUserID(user)),
		must(domain.NewQuantity(qty)), must(domain.NewRequestID(req)), eventID)
}

func TestDeductRunTwiceWithSameArgumentsDeductsOnce(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		sku := f.warm(t, "twice", 10, 1)
		eventID := uuid.NewString()

		first := must(deduct(t, f, sku, "u1", 1, "req-1", eventID))
		// A go-redis retry re-sends the identical EVALSHA, same event id included.
		second := must(deduct(t, f, sku, "u1", 1, "req-1", eventID))
		if first.Replayed || !second.Replayed || second.Released || first != second.Original() {
			t.Fatalf("retry receipt differs:\n%+v\n%+v", first, second)
		}
		// A caller retry makes a fresh event id; it must still get the original.
		third := must(deduct(t, f, sku, "u1", 1, "req-1", uuid.NewString()))
		if !third.Replayed || third.Original() != first {
			t.Fatalf("caller retry receipt differs:\n%+v\n%+v", first, third)
		}
		st := must(f.inv.State(context.Background(), sku))
		if st.Stock != 9 || st.Seq != 2 {
			t.Fatalf("state after retries = %+v, want stock 9 seq 2", st)
		}
		if n := must(f.client.XLen(context.Background(), f.keys.SKUStreamKey("twice")).Result()); n != 2 {
			t.Fatalf("stream length %d, want 2 (stocked + one deducted)", n)
		}
	})
}

// TestReplayTellsReleasedFromHeld: a replayed request id is marked Replayed,
// and Released once its units went back, with the original receipt intact.
func TestReplayTellsReleasedFromHeld(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		sku := f.warm(t, "replay-released", 10, 1)
		first := must(deduct(t, f, sku, "u1", 1, "req-1", uuid.NewString()))
		if first.Replayed || first.Released {
			t.Fatalf("first deduction marked as a replay: %+v", first)
		}
		again := must(deduct(t, f, sku, "u1", 1, "req-1", uuid.NewString()))
		if !again.Replayed || again.Released || again.Original() != first {
			t.Fatalf("replay before release = %+v, want the original %+v marked replayed", again, first)
		}
		if _, err := f.inv.Release(context.Background(), sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("req-1")),
			must(domain.NewReason("")), uuid.NewString()); err != nil {
			t.Fatal(err)
		}
		after := must(deduct(t, f, sku, "u1", 1, "req-1", uuid.NewString()))
		if !after.Replayed || !after.Released || after.Original() != first {
			t.Fatalf("replay after release = %+v, want the original %+v marked replayed and released", after, first)
		}
	})
}

func TestRefusalsWriteNothing(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "refusals", 2, 2)
		must(deduct(t, f, sku, "holder", 2, "req-holder", uuid.NewString()))
		other := f.warm(t, "other", 5, 1)
		must(deduct(t, f, other, "u", 1, "req-o", uuid.NewString()))
		unwarmed := must(domain.NewSKUID("never-warmed"))

		cases := []struct {
			name string
			sku  domain.SKUID
			user string
			qty  int64
			req  string
			want error
		}{
			{"sold out", sku, "newcomer", 1, "req-a", domain.ErrSoldOut},
			{"already purchased", other, "u", 1, "req-b", domain.ErrAlreadyPurchased},
			{"qty above limit", other, "v", 2, "req-c", domain.ErrQuantityOverLimit},
			{"not warmed", unwarmed, "u", 1, "req-d", domain.ErrNotWarmed},
			{"request id of another user", other, "w", 1, "req-o", domain.ErrConflict},
			{"request id with another qty", sku, "holder", 1, "req-holder", domain.ErrConflict},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := f.snapshot(t)
				_, err := deduct(t, f, tc.sku, tc.user, tc.qty, tc.req, uuid.NewString())
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				assertSame(t, before, f.snapshot(t))
			})
		}

		t.Run("release refusals", func(t *testing.T) {
			before := f.snapshot(t)
			reason := must(domain.NewReason(""))
			_, err := f.inv.Release(ctx, other, must(domain.NewUserID("u")), must(domain.NewRequestID("nope")), reason, uuid.NewString())
			if !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("unknown request: err = %v, want ErrNotFound", err)
			}
			_, err = f.inv.Release(ctx, other, must(domain.NewUserID("intruder")), must(domain.NewRequestID("req-o")), reason, uuid.NewString())
			if !errors.Is(err, domain.ErrConflict) {
				t.Fatalf("other user's request: err = %v, want ErrConflict", err)
			}
			assertSame(t, before, f.snapshot(t))
		})
	})
}

func TestWarmIsANoOpOnALiveSKU(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "rewarm", 10, 1)
		must(deduct(t, f, sku, "u1", 1, "r1", uuid.NewString()))
		before := f.snapshot(t)

		def := must(domain.NewSKUDefinition(sku, 999, 5))
		state, stocked, err := f.inv.Warm(ctx, def, uuid.NewString())
		if err != nil || stocked {
			t.Fatalf("re-warm: stocked=%v err=%v", stocked, err)
		}
		if state.Stock != 9 || state.Seq != 2 || state.Status != domain.StatusOpen {
			t.Fatalf("re-warm reported %+v, want the live state stock 9 seq 2 open", state)
		}
		assertSame(t, before, f.snapshot(t))
	})
}

func TestReleaseReturnsStockExactlyOnce(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "rel", 1, 1)
		must(deduct(t, f, sku, "u1", 1, "r1", uuid.NewString()))
		user, req, reason := must(domain.NewUserID("u1")), must(domain.NewRequestID("r1")), must(domain.NewReason("payment timeout"))

		first := must(f.inv.Release(ctx, sku, user, req, reason, uuid.NewString()))
		second := must(f.inv.Release(ctx, sku, user, req, reason, uuid.NewString()))
		if first.AlreadyReleased || !second.AlreadyReleased || first.EventID != second.EventID || first.Seq != second.Seq {
			t.Fatalf("release receipts: first %+v second %+v", first, second)
		}
		st := must(f.inv.State(ctx, sku))
		if st.Stock != 1 || st.Seq != 3 {
			t.Fatalf("after two releases state = %+v, want stock 1 seq 3", st)
		}
		if key, field := f.countAt(t, "rel", "u1"); f.client.HGet(ctx, key, field).Val() != "" {
			t.Fatalf("buyer still holds %q after release", f.client.HGet(ctx, key, field).Val())
		}
		if receipts, counts := f.records(t, "rel"); len(receipts) != 1 || len(counts) != 0 {
			t.Fatalf("after the release: receipts %v, counts %v; want the released receipt and no count", receipts, counts)
		}
		// The released unit can be sold again, also to the same user.
		rc := must(deduct(t, f, sku, "u1", 1, "r2", uuid.NewString()))
		if rc.Remaining != 0 || rc.Seq != 4 {
			t.Fatalf("resale receipt %+v, want remaining 0 seq 4", rc)
		}
		if receipts, counts := f.records(t, "rel"); len(receipts) != 2 || fmt.Sprint(counts) != "map[u1:1]" {
			t.Fatalf("after the resale: receipts %v, counts %v; want two receipts and u1 counting 1", receipts, counts)
		}
		events := must(f.client.XRange(ctx, f.keys.SKUStreamKey("rel"), "-", "+").Result())
		var types []string
		for _, m := range events {
			e := must(streamentry.ParseMessage(m))
			types = append(types, string(e.Type))
		}
		if fmt.Sprint(types) != "[stocked deducted released deducted]" {
			t.Fatalf("stream types %v", types)
		}
		if e := must(streamentry.ParseMessage(events[2])); e.Reason != "payment timeout" || e.Delta != 1 {
			t.Fatalf("released event %+v", e)
		}
	})
}

// TestScriptKeysShareOneClusterSlot records the keys of every script call and
// asks a cluster-enabled Redis for their slots: a script whose keys span
// slots would fail under Redis Cluster.
func TestScriptKeysShareOneClusterSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rec := &keyRecorder{}
	f.client.AddHook(rec)
	ctx := context.Background()

	for i := range 40 {
		name := fmt.Sprintf("slot-sku-%d", i)
		sku := f.warm(t, name, 5, 1)
		must(deduct(t, f, sku, "u", 1, "r", uuid.NewString()))
		_, _ = deduct(t, f, sku, "u", 1, "r2", uuid.NewString())
		must(f.inv.Release(ctx, sku, must(domain.NewUserID("u")), must(domain.NewRequestID("r")), domain.Reason{}, uuid.NewString()))
		must(f.inv.State(ctx, sku))
	}
	assertOneSlotPerCall(t, rec.calls(), 40*5)
}

// assertOneSlotPerCall asks a cluster-enabled Redis for the slot of every
// key of every recorded script call: each call must use 1 to 5 keys, all in
// one slot, and at least minCalls calls must have been recorded.
func assertOneSlotPerCall(t *testing.T, calls [][]string, minCalls int) {
	t.Helper()
	cluster := localstacktest.Redis(t, func(c *localstack.RedisConfig) {
		c.Settings = map[string]string{"cluster-enabled": "yes"}
	})
	slotClient := redis.NewClient(&redis.Options{Addr: cluster.Addr()})
	t.Cleanup(func() { _ = slotClient.Close() })
	ctx := context.Background()
	if len(calls) < minCalls {
		t.Fatalf("recorded %d script calls, want at least %d", len(calls), minCalls)
	}
	for _, keys := range calls {
		if len(keys) == 0 || len(keys) > 5 {
			t.Fatalf("script call with %d keys: %v", len(keys), keys)
		}
		want := must(slotClient.ClusterKeySlot(ctx, keys[0]).Result())
		for _, k := range keys[1:] {
			if got := must(slotClient.ClusterKeySlot(ctx, k).Result()); got != want {
				t.Fatalf("keys %v span slots %d and %d", keys, want, got)
			}
		}
	}
}

type keyRecorder struct {
	mu   sync.Mutex
	keys [][]string
}

func (r *keyRecorder) calls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys
}

func (r *keyRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *keyRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *keyRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			args := cmd.Args()
			n := int(args[2].(int))
			keys := make([]string, n)
			for i := range n {
				keys[i] = args[3+i].(string)
			}
			r.mu.Lock()
			r.keys = append(r.keys, keys)
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestRestartFencesEverySKUUntilStamped kills Redis and restarts it from its
// AOF: every SKU must refuse purchases as recovering until it is stamped,
// even through a connection the run_id tracker never saw, and resume after
// the stamp. It also holds node.lua's premise that Redis draws a new
// master_replid at every start.
func TestRestartFencesEverySKUUntilStamped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "fenced", 10, 5)
	must(deduct(t, f, sku, "u1", 1, "before", uuid.NewString()))
	oldRunID := f.nodeRunWatch.Get(f.srv.Addr())

	if err := f.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	// A caller outside the tracker, over a fresh connection.
	stale := redis.NewClient(&redis.Options{Addr: f.srv.Addr()})
	defer stale.Close()
	before := f.snapshot(t)
	_, err := deduct(t, f, sku, "u2", 1, "after", uuid.NewString())
	if !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("deduct after restart: %v, want ErrRecovering", err)
	}
	if newRunID := f.nodeRunWatch.Get(f.srv.Addr()); newRunID == oldRunID || newRunID == "" {
		t.Fatalf("run_id not refreshed on reconnect: %q -> %q", oldRunID, newRunID)
	}
	if reply, err := rawDeduct(ctx, stale, f.keys, "fenced", "u3", "stale"); err != nil || reply[0] != int64(-4) {
		t.Fatalf("deduct over an untracked connection: %v %v, want code -4 (recovering)", reply, err)
	}
	if _, err := f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("before")), domain.Reason{}, uuid.NewString()); !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("release after restart: %v, want ErrRecovering", err)
	}
	assertSame(t, before, f.snapshot(t))
	st := must(f.inv.State(ctx, sku))
	if st.Verified || st.Stock != 9 || st.Seq != 2 {
		t.Fatalf("state after restart %+v, want unverified stock 9 seq 2", st)
	}

	if stamped, err := f.reconcile.StampMany(ctx, []domain.SKUID{sku}, []int64{1}); err != nil || stamped[0] {
		t.Fatalf("stamp with a stale seq: stamped=%v err=%v, want refused", stamped, err)
	}
	if stamped, err := f.reconcile.StampMany(ctx, []domain.SKUID{sku}, []int64{2}); err != nil || !stamped[0] {
		t.Fatalf("stamp: stamped=%v err=%v", stamped, err)
	}
	if _, err := deduct(t, f, sku, "u2", 1, "after", uuid.NewString()); err != nil {
		t.Fatalf("deduct after stamp: %v", err)
	}
}

// TestPurchasesSurviveAFlushedScriptCacheAndAStall: a purchase falls back
// to sending the script body when Redis no longer knows its digest, and on
// a stalled Redis every caller, the one whose call is in flight and the
// ones waiting behind it for the same SKU, is answered ErrUnavailable
// within the configured timeout. Once Redis resumes, each caller's retry
// with the same request id gets the outcome of its call, never a second
// sale.
func TestPurchasesSurviveAFlushedScriptCacheAndAStall(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "stalled", 100, 1)
	if err := f.client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if rc, err := deduct(t, f, sku, "u0", 1, "req-0", uuid.NewString()); err != nil || rc.Seq != 2 {
		t.Fatalf("deduct after SCRIPT FLUSH = %+v, %v; want seq 2", rc, err)
	}

	const timeout, callers = 300 * time.Millisecond, 20
	inv := must(redisinventory.NewRedisInventory(f.client, f.keys, redisinventory.InventoryConfig{Timeout: timeout}))
	if err := f.srv.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.srv.Resume() })
	start := time.Now()
	errs := make([]error, callers)
	waited := make([]time.Duration, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			_, errs[i] = inv.Deduct(ctx, sku, must(domain.NewUserID(fmt.Sprint("u", i+1))), must(domain.NewQuantity(1)),
				must(domain.NewRequestID(fmt.Sprint("req-", i+1))), uuid.NewString())
			waited[i] = time.Since(start)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, domain.ErrUnavailable) || waited[i] > 10*timeout {
			t.Fatalf("caller %d on a stalled Redis = %v after %s; want ErrUnavailable within about %s", i, err, waited[i], timeout)
		}
	}
	if err := f.srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// The call in flight may still run once Redis answers; either way each
	// caller's retry settles on at most one sale.
	for i := range callers {
		var rc domain.Receipt
		var err error
		localstacktest.WaitFor(t, "the retry after the stall", 10*time.Second, func() bool {
			rc, err = deduct(t, f, sku, fmt.Sprint("u", i+1), 1, fmt.Sprint("req-", i+1), uuid.NewString())
			return err == nil
		})
		if rc.User != fmt.Sprint("u", i+1) {
			t.Fatalf("retry of caller %d: %+v", i, rc)
		}
	}
	st := must(f.inv.State(ctx, sku))
	if st.Stock != 100-1-callers || st.Seq != 2+callers {
		t.Fatalf("after the stall and the retries: state %+v; want stock %d, seq %d: one sale per request id", st, 100-1-callers, 2+callers)
	}
}

// rawDeduct runs one deduct through batch.lua by hand over client, outside
// RedisInventory and its tracker, and returns its answer.
func rawDeduct(ctx context.Context, client *redis.Client, keys redisinventory.Keyspace, sku, user, req string) ([]any, error) {
	v, err := redisinventory.BatchScript.Run(ctx, client, keys.HoldKeys(sku), "c", sku, 1, "d", user, 1, req, uuid.NewString(), "").Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 1 {
		return nil, fmt.Errorf("batch.lua answered %v for one attempt", v)
	}
	answer, _ := v[0].([]any)
	return answer, nil
}

// TestPromotedReplicaRefusesTheOldMastersFence replicates a verified SKU to
// a replica, then promotes the replica (REPLICAOF NO ONE, what Sentinel
// sends): in sync, the replica shares its master's run and reads the SKU as
// verified; once promoted, the fence it copied from the old master no
// longer matches, so purchases answer recovering there, whatever any
// caller knows of the topology, until the SKU is stamped on the new master.
func TestPromotedReplicaRefusesTheOldMastersFence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "promoted", 10, 5)
	must(deduct(t, f, sku, "u1", 1, "before", uuid.NewString()))

	srv := localstacktest.Redis(t)
	replica := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer replica.Close()
	host, port, err := net.SplitHostPort(f.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := replica.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if n, err := f.client.Wait(ctx, 1, 100).Result(); err == nil && n == 1 {
			if v, err := replica.HGet(ctx, f.keys.SKUKey("promoted"), "seq").Result(); err == nil && v == "2" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not catch up within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A master's first replica makes it start a new history (a new
	// master_replid), so the SKU is verified again, as after a restart.
	if stamped, err := f.reconcile.StampMany(ctx, []domain.SKUID{sku}, []int64{2}); err != nil || !stamped[0] {
		t.Fatalf("stamp on the master: stamped=%v err=%v", stamped, err)
	}
	if err := f.client.Wait(ctx, 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}
	replicaInv := must(redisinventory.NewRedisInventory(replica, f.keys, redisinventory.InventoryConfig{}))
	if st := must(replicaInv.State(ctx, sku)); !st.Verified {
		t.Fatalf("state on the replica in sync: %+v, want verified (it shares its master's run)", st)
	}

	// Its fence holds, so the first write meets READONLY: the whole call
	// fails with it, which is unavailable, not a script error.
	if _, err := replicaInv.Deduct(ctx, sku, must(domain.NewUserID("u2")), must(domain.NewQuantity(1)),
		must(domain.NewRequestID("on-replica")), uuid.NewString()); !errors.Is(err, domain.ErrUnavailable) || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("deduct on a replica in sync: %v, want ErrUnavailable from READONLY", err)
	}
	if err := replica.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if st := must(replicaInv.State(ctx, sku)); st.Verified || st.Seq != 2 {
		t.Fatalf("state on the promoted replica: %+v, want seq 2, not verified", st)
	}
	buyOnReplica := func() (domain.Receipt, error) {
		return replicaInv.Deduct(ctx, sku, must(domain.NewUserID("u2")), must(domain.NewQuantity(1)),
			must(domain.NewRequestID("after")), uuid.NewString())
	}
	if _, err := buyOnReplica(); !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("deduct on the promoted replica: %v, want ErrRecovering", err)
	}
	if reply, err := rawDeduct(ctx, replica, f.keys, "promoted", "u3", "raw"); err != nil || reply[0] != int64(-4) {
		t.Fatalf("batch.lua on the promoted replica: %v %v, want code -4 (recovering)", reply, err)
	}
	// The old master, not demoted in this test, still holds its own run.
	if _, err := deduct(t, f, sku, "u4", 1, "old-master", uuid.NewString()); err != nil {
		t.Fatalf("deduct on the old master: %v", err)
	}

	replicaSource := must(redisinventory.NewRedisReconcileSource(replica, f.keys, redisinventory.ReconcileSourceConfig{}))
	if stamped, err := replicaSource.StampMany(ctx, []domain.SKUID{sku}, []int64{2}); err != nil || !stamped[0] {
		t.Fatalf("stamp on the new master: stamped=%v err=%v", stamped, err)
	}
	if rc, err := buyOnReplica(); err != nil || rc.Seq != 3 {
		t.Fatalf("deduct on the new master after the stamp: %+v %v, want seq 3", rc, err)
	}
	// A replica rewrites its AOF after a full sync, and a redis-server 7.0
	// told to stop in the middle of that rewrite hung in shutdown here.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := replica.Info(ctx, "persistence").Result()
		if err == nil && strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new master's AOF rewrite did not end within 20s: %v", err)
		}
	}
}
