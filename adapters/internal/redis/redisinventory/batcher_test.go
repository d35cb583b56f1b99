package redisinventory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// batchOf sends attempts as one batch: each queues behind the held SKU in
// the order given, then all are sent together. It returns each one's error.
func batchOf(t *testing.T, f *fixture, sku domain.SKUID, attempts []func() error) []error {
	t.Helper()
	waiting, send := redisinventory.HoldBatches(f.inv, sku)
	errs := make([]error, len(attempts))
	var wg sync.WaitGroup
	for i, attempt := range attempts {
		wg.Go(func() { errs[i] = attempt() })
		for deadline := time.Now().Add(10 * time.Second); waiting() != i+1; time.Sleep(20 * time.Microsecond) {
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d did not queue within 10s", i)
			}
		}
	}
	send()
	wg.Wait()
	return errs
}

// TestAnAttemptThatFailsInTheMiddleOfABatchFailsAlone puts a malformed
// receipt and a malformed hold record in the middle of a batch: those two
// attempts fail as corrupt records (unavailable), with the script's error
// naming the problem, and write nothing, and the attempts around them sell,
// with contiguous seqs.
func TestAnAttemptThatFailsInTheMiddleOfABatchFailsAlone(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "faulty", 100, 5)
		s := sku.String()
		badHold := domain.HoldIDFor(sku, must(domain.NewRequestID("bad-hold")))
		f.plantReceipt(t, s, "bad-receipt", "not a receipt")
		f.plantReceipt(t, s, "bad-hold", "H"+badHold.String())
		f.client.HSet(ctx, f.keys.SKUKey(s), "hold:"+badHold.String(), "not\na hold")
		before := f.snapshot(t)

		buy := func(user, req string) func() error {
			return func() error { _, err := deduct(t, f, sku, user, 1, req, uuid.NewString()); return err }
		}
		ttl := must(domain.HoldConfig{MaxTTL: time.Hour, DefaultTTL: time.Hour}.NewHoldTTL(nil))
		errs := batchOf(t, f, sku, []func() error{
			buy("u1", "good-1"),
			buy("u2", "bad-receipt"),
			buy("u3", "good-2"),
			func() error {
				_, err := f.inv.Reserve(ctx, sku, must(domain.NewUserID("u4")), must(domain.NewQuantity(1)),
					must(domain.NewRequestID("bad-hold")), ttl, "", uuid.NewString())
				return err
			},
			buy("u5", "good-3"),
		})
		for i, want := range []string{"", "malformed receipt", "", "malformed hold record", ""} {
			switch {
			case want == "" && errs[i] != nil:
				t.Errorf("attempt %d: %v, want sold", i, errs[i])
			case want != "" && (!errors.Is(errs[i], domain.ErrCorruptRecord) || !errors.Is(errs[i], redisinventory.ErrScript) ||
				!strings.Contains(errs[i].Error(), want)):
				t.Errorf("attempt %d: %v, want a corrupt record whose ErrScript says %q", i, errs[i], want)
			}
		}
		st := must(f.inv.State(ctx, sku))
		if st.Stock != 97 || st.Seq != 4 {
			t.Fatalf("state %+v, want stock 97 and seq 4: three sales", st)
		}
		entries := must(f.client.XRange(ctx, f.keys.SKUStreamKey(s), "-", "+").Result())
		var seqs []int64
		for _, m := range entries {
			for _, e := range must(streamentry.ParseEvents(streamentry.MessageFields(m))) {
				if e.SKU == s {
					seqs = append(seqs, e.Seq)
				}
			}
		}
		if fmt.Sprint(seqs) != "[1 2 3 4]" {
			t.Fatalf("the stream holds seqs %v of %s, want [1 2 3 4]", seqs, s)
		}
		for _, user := range []string{"u2", "u4"} {
			key, field := f.countAt(t, s, user)
			if n, err := f.client.HExists(ctx, key, field).Result(); err != nil || n {
				t.Errorf("buyer %s of a failed attempt is recorded (%v, %v)", user, n, err)
			}
		}
		after := f.snapshot(t)
		receiptsKey, _ := f.receiptAt(t, s, "good-1")
		if before[receiptsKey] == after[receiptsKey] {
			t.Fatalf("%s did not change: the good attempts wrote no receipt", receiptsKey)
		}
		receipts, counts := f.records(t, s)
		for _, req := range []string{"good-1", "good-2", "good-3"} {
			if receipts[req] == "" {
				t.Errorf("no receipt of %s: %v", req, receipts)
			}
		}
		if len(receipts) != 5 || fmt.Sprint(counts) != "map[u1:1 u3:1 u5:1]" {
			t.Errorf("receipts %v and counts %v, want the two planted and three sales' receipts, and the three buyers", receipts, counts)
		}
		if key, field := f.receiptAt(t, s, "bad-receipt"); must(f.client.HGet(ctx, key, field).Result()) != "not a receipt" {
			t.Fatalf("the malformed receipt became %q", f.client.HGet(ctx, key, field).Val())
		}
	})
}

// TestABatchWhoseFirstWriteFailsWritesNothing gives the SKU's stream key
// the wrong type: the call's first write, an XADD, fails, so the call fails
// whole with Redis's error, every attempt is answered with it, and Redis is
// left as it was.
func TestABatchWhoseFirstWriteFailsWritesNothing(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "unwritable", 100, 5)
		stream := f.keys.SKUStreamKey(sku.String())
		entries := must(f.client.XRange(ctx, stream, "-", "+").Result())
		if err := f.client.Del(ctx, stream).Err(); err != nil {
			t.Fatal(err)
		}
		f.client.Set(ctx, stream, "not a stream", 0)
		t.Cleanup(func() {
			f.client.Del(ctx, stream)
			for _, m := range entries {
				f.client.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: m.ID, Values: m.Values})
			}
		})
		before := f.snapshot(t)
		var attempts []func() error
		for i := range 4 {
			attempts = append(attempts, func() error {
				_, err := deduct(t, f, sku, fmt.Sprint("u", i), 1, fmt.Sprint("r", i), uuid.NewString())
				return err
			})
		}
		for i, err := range batchOf(t, f, sku, attempts) {
			if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("attempt %d: %v, want Redis's WRONGTYPE", i, err)
			}
		}
		assertSame(t, before, f.snapshot(t))
	})
}

// TestConcurrentPurchasesOfOneSKUShareScriptCalls fires many purchases at
// one SKU at once: they go in fewer calls than purchases, none larger than
// MaxBatch, and every unit sells once.
func TestConcurrentPurchasesOfOneSKUShareScriptCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var calls, largest atomic.Int64
	inv := must(redisinventory.NewRedisInventory(f.client, f.keys, redisinventory.InventoryConfig{MaxBatch: 16,
		ObserveBatch: func(n int) {
			calls.Add(1)
			for m := largest.Load(); int64(n) > m && !largest.CompareAndSwap(m, int64(n)); m = largest.Load() {
			}
		}}))
	const buyers, stock = 2000, 1500
	sku := f.warm(t, "crowded", stock, 1)
	var sold, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range buyers {
		wg.Go(func() {
			_, err := inv.Deduct(ctx, sku, must(domain.NewUserID(fmt.Sprint("u", i))), must(domain.NewQuantity(1)),
				must(domain.NewRequestID(fmt.Sprint("r", i))), uuid.NewString())
			switch {
			case err == nil:
				sold.Add(1)
			case errors.Is(err, domain.ErrSoldOut):
				soldOut.Add(1)
			default:
				t.Errorf("buyer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	st := must(f.inv.State(ctx, sku))
	if sold.Load() != stock || soldOut.Load() != buyers-stock || st.Stock != 0 || st.Seq != stock+1 {
		t.Fatalf("sold %d, sold out %d, state %+v; want %d sold and the rest sold out", sold.Load(), soldOut.Load(), st, stock)
	}
	if calls.Load() >= buyers || largest.Load() > 16 || largest.Load() < 2 {
		t.Fatalf("%d script calls for %d purchases, the largest batch %d: want batches of 2 to 16", calls.Load(), buyers, largest.Load())
	}
}

// TestAWrongTypedKeyOfOneSKUFailsOnlyItsAttempts sends one call with the
// attempts of two SKUs of one partition, a key that one of them reads
// being a string (its buyers hash in the 1.0 layout; a one-hash SKU reads
// only its own hash): that SKU's attempts fail with Redis's WRONGTYPE and
// write nothing, and the other SKU's sell, events included.
func TestAWrongTypedKeyOfOneSKUFailsOnlyItsAttempts(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		good := f.warm(t, "typed-0", 100, 5)
		name := ""
		for n := 1; name == ""; n++ {
			if id := fmt.Sprint("typed-", n); f.keys.Partition(id) == f.keys.Partition(good.String()) {
				name = id
			}
		}
		bad := f.warm(t, name, 100, 5)
		damaged := f.keys.BuyersKey(bad.String())
		if f.layoutOf(t, bad.String()) == redisinventory.LayoutOneHash {
			damaged = f.keys.SKUKey(bad.String())
		}
		if err := f.client.Del(ctx, damaged).Err(); err != nil {
			t.Fatal(err)
		}
		f.client.Set(ctx, damaged, "not a hash", 0)
		before := keyDumps(t, f, f.keys.SKUKeys(bad.String()))
		buy := func(sku domain.SKUID, i int) func() error {
			return func() error {
				_, err := deduct(t, f, sku, fmt.Sprint("u", i), 1, fmt.Sprint("r", i), uuid.NewString())
				return err
			}
		}
		errs := batchOf(t, f, good, []func() error{buy(good, 1), buy(bad, 2), buy(good, 3), buy(bad, 4)})
		for i, err := range errs {
			switch {
			case i%2 == 0 && err != nil:
				t.Errorf("attempt %d on %s: %v, want sold", i, good, err)
			case i%2 == 1 && (!errors.Is(err, redisinventory.ErrScript) || !strings.Contains(fmt.Sprint(err), "WRONGTYPE")):
				t.Errorf("attempt %d on %s: %v, want Redis's WRONGTYPE", i, bad, err)
			}
		}
		if st := must(f.inv.State(ctx, good)); st.Stock != 98 || st.Seq != 3 {
			t.Fatalf("state of %s %+v, want two sales", good, st)
		}
		// Every key of bad as it was: its hash, and no receipt or count.
		if after := keyDumps(t, f, f.keys.SKUKeys(bad.String())); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("the keys of %s changed: %q, were %q", bad, after, before)
		}
		var sold []string
		for _, m := range must(f.client.XRange(ctx, f.keys.SKUStreamKey(good.String()), "-", "+").Result()) {
			for _, e := range must(streamentry.ParseEvents(streamentry.MessageFields(m))) {
				if e.Type == domain.EventDeducted {
					sold = append(sold, e.SKU+" "+e.RequestID)
				}
			}
		}
		if want := fmt.Sprint([]string{good.String() + " r1", good.String() + " r3"}); fmt.Sprint(sold) != want {
			t.Fatalf("the stream holds the sales %v, want %s", sold, want)
		}
	})
}

// keyDumps reads the DUMP of each key, "" for a key that does not exist.
func keyDumps(t *testing.T, f *fixture, keys []string) map[string]string {
	t.Helper()
	dumps := map[string]string{}
	for _, k := range keys {
		v, err := f.client.Dump(context.Background(), k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		dumps[k] = v
	}
	return dumps
}

// TestACallsEntryHasTheColumnsOfItsEvents sends three calls of two events
// each and reads their stream entries raw: every entry has e, user and
// request_id, one line per event in the call's order; tp only when a
// purchase of the call is in a sampled trace, with an empty line for each
// other event; hold_id, expires_at and order_id only when the call holds a
// reserve, with empty lines for its deducts, and order_id even when every
// line of it is empty.
func TestACallsEntryHasTheColumnsOfItsEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "columns", 100, 5)
	sampled := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	buy := func(ctx context.Context, user, req string) func() error {
		return func() error {
			_, err := f.inv.Deduct(ctx, sku, must(domain.NewUserID(user)), must(domain.NewQuantity(1)),
				must(domain.NewRequestID(req)), uuid.NewString())
			return err
		}
	}
	ttl := must(domain.HoldConfig{MaxTTL: time.Hour, DefaultTTL: time.Hour}.NewHoldTTL(nil))
	hold := func() error {
		_, err := f.inv.Reserve(ctx, sku, must(domain.NewUserID("u6")), must(domain.NewQuantity(1)),
			must(domain.NewRequestID("r6")), ttl, "", uuid.NewString())
		return err
	}
	for _, call := range [][]func() error{
		{buy(ctx, "u1", "r1"), buy(sampled, "u2", "r2")},
		{buy(ctx, "u3", "r3"), buy(ctx, "u4", "r4")},
		{buy(sampled, "u5", "r5"), hold},
	} {
		for i, err := range batchOf(t, f, sku, call) {
			if err != nil {
				t.Fatalf("attempt %d: %v", i, err)
			}
		}
	}

	entries := must(f.client.XRange(ctx, f.keys.SKUStreamKey(sku.String()), "-", "+").Result())
	var got []string
	for _, m := range entries {
		if _, sale := m.Values["request_id"]; !sale {
			continue // the warm's
		}
		var fields []string
		for _, c := range []string{"user", "request_id", "tp", "hold_id", "expires_at", "order_id"} {
			if v, ok := m.Values[c]; ok {
				line := strings.Split(v.(string), "\n")
				if c == "tp" {
					for i := range line {
						if line[i] != "" {
							line[i] = "<traceparent>"
						}
					}
				}
				if c == "expires_at" && line[1] != "" {
					line[1] = "<deadline>"
				}
				fields = append(fields, c+"="+strings.Join(line, ","))
			}
		}
		got = append(got, strings.Join(fields, " "))
	}
	want := []string{
		"user=u1,u2 request_id=r1,r2 tp=,<traceparent>",
		"user=u3,u4 request_id=r3,r4",
		"user=u5,u6 request_id=r5,r6 tp=<traceparent>, hold_id=," + domain.HoldIDFor(sku, must(domain.NewRequestID("r6"))).String() +
			" expires_at=,<deadline> order_id=,",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the entries' columns are\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, m := range entries {
		if _, err := streamentry.ParseEvents(streamentry.MessageFields(m)); err != nil {
			t.Errorf("entry %s does not parse: %v", m.ID, err)
		}
	}
}
