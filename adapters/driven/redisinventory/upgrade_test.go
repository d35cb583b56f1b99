package redisinventory_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// previous is a serve of the previous version beside the current one: its
// scripts, kept verbatim in testdata/v1, run on the same Redis. They write
// cjson receipts, one field per value in the stream, Redis TIME and a SHA-1
// chain link computed in Redis.
type previous struct {
	t      *testing.T
	s      *stacktest.Stack
	deduct *redis.Script
	warm   *redis.Script
}

func newPrevious(t *testing.T, s *stacktest.Stack) *previous {
	script := func(name string) *redis.Script {
		chain := must(os.ReadFile("testdata/v1/chain.lua"))
		body := must(os.ReadFile("testdata/v1/" + name))
		return redis.NewScript(string(chain) + string(body))
	}
	return &previous{t: t, s: s, deduct: script("deduct.lua"), warm: script("warm.lua")}
}

var runIDField = regexp.MustCompile(`run_id:([0-9a-f]+)`)

func (p *previous) runID() string {
	info := must(p.s.RedisClient.Info(context.Background(), "server").Result())
	return runIDField.FindStringSubmatch(info)[1]
}

// stamp writes the fence the previous version's reconciler wrote once it
// had verified sku: the run_id and LASTSAVE of Redis.
func (p *previous) stamp(sku string) {
	ctx := context.Background()
	if err := p.s.RedisClient.HSet(ctx, p.s.Keyspace.SKUKey(sku), "fence", p.runID(),
		"epoch", must(p.s.RedisClient.LastSave(ctx).Result())).Err(); err != nil {
		p.t.Fatal(err)
	}
}

// stampCurrent stamps sku as the current reconciler does once it verified it.
func stampCurrent(t *testing.T, s *stacktest.Stack, sku string) {
	t.Helper()
	ctx := context.Background()
	seq := must(s.RedisClient.HGet(ctx, s.Keyspace.SKUKey(sku), "seq").Int64())
	if stamped, err := s.ReconcileSource.StampMany(ctx, []domain.SKUID{must(domain.NewSKUID(sku))}, []int64{seq}); err != nil || !stamped[0] {
		t.Fatalf("stamp %s: %v %v", sku, stamped, err)
	}
}

// buy runs the previous deduct.lua and returns its raw reply.
func (p *previous) buy(sku, user, req string) ([]any, error) {
	k := p.s.Keyspace
	return p.deduct.Run(context.Background(), p.s.RedisClient,
		[]string{k.SKUKey(sku), k.BuyersKey(sku), k.RequestsKey(sku), k.SKUStreamKey(sku)},
		sku, user, 1, req, uuid.NewString(), p.runID()).Slice()
}

func current(t *testing.T, s *stacktest.Stack, sku, user, req string) domain.Receipt {
	t.Helper()
	rc, err := s.Service.Deduct(context.Background(), ledger.MustDeductCommand(sku, user, 1, req))
	if err != nil {
		t.Fatalf("deduct %s %s: %v", sku, req, err)
	}
	return rc
}

// TestPreviousVersionSideBySide runs the previous version's purchase script
// and the current one on the same Redis, as during a rolling deploy, and
// checks what the upgrade promises: a retry of a purchase the previous
// version made returns its original receipt, a release of it returns its
// units once, both stream formats are projected, a ledger the previous
// version chained with SHA-1 keeps its links and continues with SHA-256,
// the mixed chain verifies, and Redis restores from that ledger without any
// hash of its own. The previous script cannot read a current receipt: it
// fails with a script error and writes nothing, which the README's upgrade
// order (projectors first, then the api) accounts for. The fence changed
// format (node.lua): the current version sells under the previous
// version's fence and its reconciler counts it as verified, so it leaves it
// in place; the previous version refuses a SKU the current one stamped,
// writing nothing, until its own reconciler stamped it again. A Redis
// restart voids the previous fence for the current version too.
func TestPreviousVersionSideBySide(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	old := newPrevious(t, s)

	// legacy is a sale the previous version started: its ledger is chained
	// by Redis, with SHA-1, from seq 1.
	if _, _, err := s.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: "legacy", Stock: 10, PerUserLimit: 2}); err != nil {
		t.Fatal(err)
	}
	k := s.Keyspace
	stockedID := must(s.SKUs.ClaimStockedEventID(ctx, must(domain.NewSKUID("legacy")), uuid.NewString()))
	if _, err := old.warm.Run(ctx, s.RedisClient, []string{k.SKUKey("legacy"), k.SKUStreamKey("legacy")}, "legacy", 10, 2, stockedID).Slice(); err != nil {
		t.Fatal(err)
	}
	first := must(old.buy("legacy", "u1", "r1"))
	must(old.buy("legacy", "u2", "r2"))

	// The current version sells under the previous version's fence, and
	// its reconciler counts that fence as verified: it would not stamp the
	// SKU again, which would stop the previous version selling it.
	legacyID := must(domain.NewSKUID("legacy"))
	verified := func() bool {
		t.Helper()
		return must(s.ReconcileSource.Snapshot(ctx, []domain.SKUID{legacyID})).SKUs[legacyID].Verified
	}
	if !verified() {
		t.Fatal("the current reconciler does not count the previous version's fence as verified")
	}
	// A retry of the previous version's purchase, now on the current one.
	retry := current(t, s, "legacy", "u1", "r1")
	if !retry.Replayed || retry.EventID != first[1] || retry.Seq != first[2] || retry.Remaining != first[3] {
		t.Fatalf("retry of a previous-version purchase: %+v, want the original event_id %v seq %v remaining %v", retry, first[1], first[2], first[3])
	}
	// The current version continues the sale, and releases a previous purchase.
	current(t, s, "legacy", "u3", "r3")
	rel, err := s.Service.Release(ctx, ledger.MustReleaseCommand("legacy", "u2", "r2", "refund"))
	if err != nil || rel.AlreadyReleased {
		t.Fatalf("release of a previous-version purchase: %+v %v", rel, err)
	}
	if again, err := s.Service.Release(ctx, ledger.MustReleaseCommand("legacy", "u2", "r2", "refund")); err != nil || !again.AlreadyReleased || again.Seq != rel.Seq {
		t.Fatalf("second release: %+v %v, want the first release's seq %d", again, err, rel.Seq)
	}
	// Side by side: both versions sell the same SKU under the previous fence.
	must(old.buy("legacy", "u4", "r4"))
	// A SKU the current version stamped (after a restart, say) is refused
	// by the previous one, without a write, until its reconciler stamps it.
	stampCurrent(t, s, "legacy")
	if reply, err := old.buy("legacy", "u6", "r6"); err != nil || reply[0] != int64(-4) {
		t.Fatalf("previous deduct under the current fence: %v %v, want -4 (recovering)", reply, err)
	}
	old.stamp("legacy")
	mixed := current(t, s, "legacy", "u5", "r5")
	if mixed.Seq != 7 || mixed.Remaining != 6 {
		t.Fatalf("after both versions sold: %+v, want seq 7 remaining 6", mixed)
	}

	// The previous script on a current receipt refuses, and writes nothing.
	old.stamp("legacy")
	before := must(s.RedisClient.HGetAll(ctx, k.SKUKey("legacy")).Result())
	streamLen := must(s.RedisClient.XLen(ctx, k.SKUStreamKey("legacy")).Result())
	if _, err := old.buy("legacy", "u5", "r5"); err == nil || !strings.Contains(err.Error(), "user_script") {
		t.Fatalf("previous script on a current receipt: %v, want a script error", err)
	}
	if after := must(s.RedisClient.HGetAll(ctx, k.SKUKey("legacy")).Result()); after["stock"] != before["stock"] || after["seq"] != before["seq"] ||
		must(s.RedisClient.XLen(ctx, k.SKUStreamKey("legacy")).Result()) != streamLen {
		t.Fatalf("previous script wrote after refusing: %v -> %v", before, after)
	}

	s.ProjectStreams(t)
	rep := must(ledger.VerifyChains(ctx, s.Seals, "legacy", nil))
	if rep.Events != 7 || rep.Sealed != 7 || len(rep.Broken) != 0 || len(rep.Unsealed) != 0 {
		t.Fatalf("mixed ledger: %+v, want 7 events, all sealed, nothing broken", rep)
	}
	var sha1Seals, sha256Seals int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE algorithm = 'sha1'), count(*) FILTER (WHERE algorithm = 'sha256')
FROM ledger_seals WHERE sku = 'legacy'`).Scan(&sha1Seals, &sha256Seals); err != nil {
		t.Fatal(err)
	}
	// seqs 1-3 were chained by Redis and keep their SHA-1 links; seq 6 was
	// written by the previous script after the current one had moved the
	// chain on, so its Redis link points elsewhere and it is sealed anew.
	if sha1Seals != 3 || sha256Seals != 4 {
		t.Fatalf("seals: %d sha1, %d sha256; want 3 and 4", sha1Seals, sha256Seals)
	}

	// A restart gives Redis a new run_id and LASTSAVE: the previous fence
	// no longer holds for the current version either, until it is verified.
	old.stamp("legacy")
	if err := s.Redis.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("legacy", "u7", 1, "r7")); !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("current deduct under the previous fence after a restart: %v, want ErrRecovering", err)
	}
	if verified() {
		t.Fatal("the previous fence still counts as verified after a restart")
	}

	// Redis lost, restored from the mixed ledger: no hash is needed, and
	// the chain continues.
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Recovery(t).RestoreSKU(ctx, "legacy"); err != nil {
		t.Fatal(err)
	}
	if again := current(t, s, "legacy", "u1", "r1"); again.EventID != first[1] || again.Seq != first[2] {
		t.Fatalf("retry after restore: %+v", again)
	}
	current(t, s, "legacy", "u6", "r6")
	s.ProjectStreams(t)
	if rep := must(ledger.VerifyChains(ctx, s.Seals, "legacy", nil)); rep.Sealed != 8 || len(rep.Broken) != 0 {
		t.Fatalf("after restore and a sale: %+v", rep)
	}
}
