package refusals

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// refusingInventory answers every Deduct with err: pure logic, no Redis.
type refusingInventory struct {
	ledger.Inventory
	err error
}

func (r refusingInventory) Deduct(context.Context, domain.SKUID, domain.UserID, domain.Quantity, domain.RequestID, string) (domain.Receipt, error) {
	return domain.Receipt{}, r.err
}

func deduct(t *testing.T, inv ledger.Inventory, sku string) {
	t.Helper()
	id, err := domain.NewSKUID(sku)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = inv.Deduct(context.Background(), id, domain.UserID{}, domain.Quantity{}, domain.RequestID{}, "")
}

func TestWrapCountsRuleRefusalsOnly(t *testing.T) {
	c := NewCounter(10)
	deduct(t, c.Wrap(refusingInventory{err: fmt.Errorf("script: %w", domain.ErrSoldOut)}), "a")
	deduct(t, c.Wrap(refusingInventory{err: domain.ErrSoldOut}), "a")
	deduct(t, c.Wrap(refusingInventory{err: domain.ErrAlreadyPurchased}), "b")
	deduct(t, c.Wrap(refusingInventory{err: domain.ErrUnavailable}), "a") // Redis down: not a refusal
	deduct(t, c.Wrap(refusingInventory{}), "a")                           // sold: not a refusal
	got, dropped := c.take()
	want := map[string]map[string]int64{"a": {string(domain.CodeSoldOut): 2}, "b": {string(domain.CodeOf(domain.ErrAlreadyPurchased)): 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) || dropped != 0 {
		t.Fatalf("counted %v (dropped %d), want %v", got, dropped, want)
	}
	if again, _ := c.take(); len(again) != 0 {
		t.Fatalf("take did not start afresh: %v", again)
	}
}

// refusingOrders answers every Reserve with err: pure logic, no Redis.
type refusingOrders struct {
	ledger.OrderInventory
	err error
}

func (r refusingOrders) Reserve(context.Context, domain.SKUID, domain.UserID, domain.Quantity, domain.RequestID, domain.HoldTTL, string, string) (domain.Hold, error) {
	return domain.Hold{}, r.err
}

func TestWrapOrdersCountsRefusedReservesOnly(t *testing.T) {
	c := NewCounter(10)
	id, err := domain.NewSKUID("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []error{domain.ErrSoldOut, fmt.Errorf("line 2: %w", domain.ErrAlreadyPurchased), domain.ErrUnavailable, nil} {
		_, _ = c.WrapOrders(refusingOrders{err: e}).Reserve(context.Background(), id, domain.UserID{}, domain.Quantity{}, domain.RequestID{}, domain.HoldTTL{}, "", "")
	}
	got, _ := c.take()
	want := map[string]map[string]int64{"a": {string(domain.CodeSoldOut): 1, string(domain.CodeOf(domain.ErrAlreadyPurchased)): 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
}

func TestCounterTracksAtMostMaxSKUs(t *testing.T) {
	c := NewCounter(3)
	for i := range 5 {
		c.Add(fmt.Sprintf("s%d", i), "sold_out")
		c.Add(fmt.Sprintf("s%d", i), "sold_out")
	}
	got, dropped := c.take()
	if len(got) != 3 || dropped != 4 {
		t.Fatalf("tracked %d SKUs, dropped %d; want 3 and 4", len(got), dropped)
	}
	// A new interval has room again.
	c.Add("s4", "sold_out")
	if got, _ := c.take(); got["s4"]["sold_out"] != 1 {
		t.Fatalf("after a flush: %v", got)
	}
}

// TestTwoProcessesAddUp runs two counters with their flushers, as two
// serve processes would, against a real Redis: thousands of refusals on
// both, concurrently, add up in the one hash that Read returns, in the
// SKU's partition slot and with a TTL.
func TestTwoProcessesAddUp(t *testing.T) {
	srv := localstacktest.Redis(t)
	keys, err := redisinventory.NewKeyspace(16)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	counters := []*Counter{NewCounter(0), NewCounter(0)}
	for _, c := range counters {
		f, err := NewFlusher(FlusherConfig{Counter: c, Client: client, Keys: keys, Interval: 50 * time.Millisecond, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		runs.Go(func() { _ = f.Run(ctx) })
	}
	var adds sync.WaitGroup
	for g := range 200 {
		adds.Go(func() {
			for i := range 20 {
				reason := "sold_out"
				if i%4 == 0 {
					reason = "already_purchased"
				}
				counters[g%2].Add("sale-1", reason)
			}
		})
	}
	adds.Wait()
	cancel() // the last flush happens on the way out
	runs.Wait()
	got, err := Read(context.Background(), client, keys, "sale-1")
	if err != nil {
		t.Fatal(err)
	}
	if got["sold_out"] != 3000 || got["already_purchased"] != 1000 || len(got) != 2 {
		t.Fatalf("Read = %v, want sold_out 3000 and already_purchased 1000", got)
	}
	key := keys.RefusalsKey("sale-1")
	if !strings.Contains(key, fmt.Sprintf("{p%02d}", keys.Partition("sale-1"))) {
		t.Fatalf("key %s is not in the SKU's partition slot", key)
	}
	if ttl := client.TTL(context.Background(), key).Val(); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of %s = %s, want (0, 1h]", key, ttl)
	}
	if other, err := Read(context.Background(), client, keys, "never-refused"); err != nil || len(other) != 0 {
		t.Fatalf("Read of a SKU never refused = %v, %v", other, err)
	}
}

// TestRedisDownDropsAndLogsOnce: with Redis gone, counting never blocks,
// each flush drops its counts, one warning is logged for the whole outage,
// and the next flush after Redis is back counts again.
func TestRedisDownDropsAndLogsOnce(t *testing.T) {
	srv := localstacktest.Redis(t)
	keys, _ := redisinventory.NewKeyspace(4)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = client.Close() })
	var logs bytes.Buffer
	c := NewCounter(0)
	f, err := NewFlusher(FlusherConfig{Counter: c, Client: client, Keys: keys, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c.Add("s", "sold_out")
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		f.flushLogged(fctx)
		cancel()
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings during the outage, want 1:\n%s", n, logs.String())
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c.Add("s", "sold_out")
	f.flushLogged(ctx)
	if !strings.Contains(logs.String(), "counts reach Redis again") {
		t.Fatalf("no recovery line:\n%s", logs.String())
	}
	got, err := Read(ctx, client, keys, "s")
	if err != nil || got["sold_out"] != 1 {
		t.Fatalf("after the outage Read = %v, %v; want the one refusal since (the others dropped)", got, err)
	}
}

func TestFlusherConfigNamesWhatIsMissing(t *testing.T) {
	_, err := NewFlusher(FlusherConfig{})
	if err == nil || !strings.Contains(err.Error(), "Counter") || !strings.Contains(err.Error(), "Client") {
		t.Fatalf("NewFlusher(empty) = %v, want Counter and Client named", err)
	}
}

// BenchmarkRefusedDeduct is the purchase path's cost of counting: a
// refused Deduct of an in-memory inventory, bare and counted, from every
// core at once (the mutex's worst case: one SKU, one reason).
func BenchmarkRefusedDeduct(b *testing.B) {
	sku, _ := domain.NewSKUID("hot")
	bare := refusingInventory{err: domain.ErrSoldOut}
	for _, tc := range []struct {
		name string
		inv  ledger.Inventory
	}{{"bare", bare}, {"counted", NewCounter(0).Wrap(bare)}} {
		b.Run(tc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = tc.inv.Deduct(context.Background(), sku, domain.UserID{}, domain.Quantity{}, domain.RequestID{}, "")
				}
			})
		})
	}
}
