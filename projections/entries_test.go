package projections_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections"
)

// refuseOne is a ledger that refuses one event id, as a ledger with a bug
// would, and takes every other.
type refuseOne struct {
	stacktest.ProjectorStore
	id string
}

func (r refuseOne) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	for _, e := range events {
		if e.ID == r.id {
			return nil, fmt.Errorf("%w: the ledger refuses %s", domain.ErrConflict, e.ID)
		}
	}
	return r.ProjectorStore.AppendBatch(ctx, events)
}

// skuBeside returns a SKU id starting with prefix in the partition of sku,
// so that one purchase call may carry the attempts of both.
func skuBeside(s *stacktest.Stack, sku, prefix string) string {
	for i := 0; ; i++ {
		if c := fmt.Sprint(prefix, i); s.Keyspace.Partition(c) == s.Keyspace.Partition(sku) {
			return c
		}
	}
}

// TestEntriesOfSeveralEventsAndOf100 projects a backlog mixing 1.0.0's
// one-event entries (as its deduct.lua wrote them) with entries of several
// events of two SKUs of one partition: every good event lands in the ledger
// exactly once; a malformed event, and one the ledger refuses, go to
// dead_letters on their own while their siblings are projected; an entry
// whose columns do not match goes there whole; the refused event's dead
// letter replays once its cause is gone; nothing stays pending.
func TestEntriesOfSeveralEventsAndOf100(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	a := "multi-a"
	b := skuBeside(s, a, "multi-b")
	s.SKU(t, a, 100, 10)
	s.SKU(t, b, 100, 10)
	stream := s.Keyspace.SKUStreamKey(a)
	ids := map[string]string{}
	id := func(name string) string {
		ids[name] = uuid.NewString()
		return ids[name]
	}
	xadd := func(values ...any) string {
		t.Helper()
		sid, err := s.RedisClient.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: values}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return sid
	}
	line := func(name, typ, sku string, seq, qty, balance any) string {
		return fmt.Sprintf("%s %s %s %v %v %v", id(name), typ, sku, seq, qty, balance)
	}
	// 1.0.0's deduct.lua: XADD stream * e <packed> user <u> request_id <r>.
	xadd("e", line("a2", "deducted", a, 2, 1, 99), "user", "u1", "request_id", "r1")
	xadd("e", strings.Join([]string{line("a3", "deducted", a, 3, 1, 98), line("b2", "deducted", b, 2, 2, 98), line("a4", "deducted", a, 4, 1, 97)}, "\n"),
		"user", "u2\nu3\nu4", "request_id", "r2\nr3\nr4", "tp", "\n\n")
	mixed := xadd("e", strings.Join([]string{line("b3", "deducted", b, 3, 1, 97), line("bad", "deducted", b, "x", 1, 96),
		line("a5", "deducted", a, 5, 1, 96), line("b4", "deducted", b, 4, 1, 96)}, "\n"),
		"user", "u5\nu6\nu7\nu8", "request_id", "r5\nr6\nr7\nr8")
	torn := xadd("e", line("t1", "deducted", a, 90, 1, 1)+"\n"+line("t2", "deducted", a, 91, 1, 1), "user", "u9", "request_id", "r9\nr10")
	xadd("e", line("a6", "deducted", a, 6, 1, 95), "user", "u10", "request_id", "r11")

	s.RunProjector(t, stacktest.ProjectorStoreOf(refuseOne{ProjectorStore: s.Projection, id: ids["a5"]}))
	want := map[string][]string{a: {"a2", "a3", "a4", "a6"}, b: {"b2", "b3", "b4"}}
	for sku, names := range want {
		localstacktest.WaitFor(t, "the ledger of "+sku, 30*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) == len(names)+1 })
		for _, n := range names {
			var count int
			if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE event_id = $1`, ids[n]).Scan(&count); err != nil || count != 1 {
				t.Fatalf("event %s: %d rows (err %v), want 1", n, count, err)
			}
		}
	}
	localstacktest.WaitFor(t, "no entry left pending", 10*time.Second, func() bool {
		pending, err := s.RedisClient.XPending(ctx, stream, projections.ConsumerGroup).Result()
		return err == nil && pending.Count == 0
	})
	page, err := s.App.DeadLetters.List(ctx, ledger.DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	letters := map[string]ledger.DeadLetter{}
	for _, dl := range page.DeadLetters {
		letters[fmt.Sprint(dl.StreamID, "/", dl.Event)] = dl
	}
	bad, refused, whole := letters[mixed+"/1"], letters[mixed+"/2"], letters[torn+"/0"]
	if len(letters) != 3 || bad.ID == 0 || refused.ID == 0 || whole.ID == 0 {
		t.Fatalf("dead letters %v, want events 1 and 2 of %s and the whole of %s", letters, mixed, torn)
	}
	if !strings.HasPrefix(bad.Fields["e"], ids["bad"]) || bad.Fields["user"] != "u6" || !strings.Contains(bad.Error, "seq") {
		t.Errorf("the malformed event's letter: %+v", bad)
	}
	if !strings.HasPrefix(refused.Fields["e"], ids["a5"]) || refused.Fields["request_id"] != "r7" || !strings.Contains(refused.Error, "refuses") {
		t.Errorf("the refused event's letter: %+v", refused)
	}
	if whole.Fields["request_id"] != "r9\nr10" || !strings.Contains(whole.Error, "user") {
		t.Errorf("the torn entry's letter: %+v", whole)
	}
	// The refusal's cause is gone (replay appends to the ledger itself).
	ops := ledger.WithActor(ctx, "test")
	if dl, err := s.App.DeadLetters.Replay(ops, refused.ID); err != nil || dl.Status != ledger.DeadLetterReplayed {
		t.Fatalf("replay of the refused event: %+v %v", dl, err)
	}
	if n := ledgerCount(t, s.Pool, a); n != 6 {
		t.Fatalf("%s has %d ledger rows after the replay, want 6", a, n)
	}
	if _, err := s.App.DeadLetters.Replay(ops, bad.ID); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("replay of the malformed event: %v, want ErrConflict", err)
	}
}
