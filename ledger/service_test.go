package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

type attempt struct {
	cmd     ledger.DeductCommand
	receipt domain.Receipt
	err     error
}

// fire runs every command in its own goroutine, released at once.
func fire(svc *ledger.Service, cmds []ledger.DeductCommand) []attempt {
	out := make([]attempt, len(cmds))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Go(func() {
			<-start
			rc, err := svc.Deduct(context.Background(), c)
			out[i] = attempt{cmd: c, receipt: rc, err: err}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// TestFlashSaleInvariants: 5,000 goroutines, 2,000 distinct users plus repeat
// buyers and retries, on one SKU with stock 500 and limit 1.
func TestFlashSaleInvariants(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	const sku, stock = "flash-1", 500
	s.SKU(t, sku, stock, 1)

	var cmds []ledger.DeductCommand
	for u := range 2000 {
		cmds = append(cmds, ledger.MustDeductCommand(sku, fmt.Sprintf("user-%d", u), 1, fmt.Sprintf("req-%d", u)))
	}
	for i := range 1500 { // retries: same request id again
		u := i % 2000
		cmds = append(cmds, ledger.MustDeductCommand(sku, fmt.Sprintf("user-%d", u), 1, fmt.Sprintf("req-%d", u)))
	}
	for i := range 1500 { // repeat buyers: same user, new request
		u := (i * 7) % 2000
		cmds = append(cmds, ledger.MustDeductCommand(sku, fmt.Sprintf("user-%d", u), 1, fmt.Sprintf("again-%d", i)))
	}
	results := fire(s.Service, cmds)

	soldEvents := map[string]domain.Receipt{}
	perUser := map[string]map[string]bool{}
	byRequest := map[string]domain.Receipt{}
	for _, r := range results {
		switch {
		case r.err == nil:
			if prev, ok := byRequest[r.cmd.RequestID.String()]; ok && prev.Original() != r.receipt.Original() {
				t.Fatalf("request %s got two different receipts: %+v and %+v", r.cmd.RequestID.String(), prev, r.receipt)
			}
			byRequest[r.cmd.RequestID.String()] = r.receipt
			soldEvents[r.receipt.EventID] = r.receipt
			if perUser[r.cmd.User.String()] == nil {
				perUser[r.cmd.User.String()] = map[string]bool{}
			}
			perUser[r.cmd.User.String()][r.receipt.EventID] = true
		case errors.Is(r.err, domain.ErrSoldOut), errors.Is(r.err, domain.ErrAlreadyPurchased):
		default:
			t.Fatalf("unexpected outcome for %+v: %v", r.cmd, r.err)
		}
	}
	if len(soldEvents) != stock {
		t.Fatalf("sold %d units, want exactly %d", len(soldEvents), stock)
	}
	for user, events := range perUser {
		if len(events) > 1 {
			t.Fatalf("user %s bought %d times under limit 1", user, len(events))
		}
	}

	st, err := s.Service.State(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	if *st.RedisStock != 0 || *st.RedisSeq != stock+1 {
		t.Fatalf("redis stock %d seq %d, want 0 and %d", *st.RedisStock, *st.RedisSeq, stock+1)
	}

	entries := s.StreamEvents(t, sku)
	counts := map[string]int{}
	seen := map[string]bool{}
	for i, e := range entries {
		counts[e["type"].(string)]++
		if seq := e["seq"].(string); seq != strconv.Itoa(i+1) {
			t.Fatalf("stream entry %d has seq %s: seqs must be contiguous", i, seq)
		}
		id := e["event_id"].(string)
		if seen[id] {
			t.Fatalf("event id %s appears twice in the stream", id)
		}
		seen[id] = true
		if e["type"] == "deducted" {
			if _, ok := soldEvents[id]; !ok {
				t.Fatalf("stream has deduction %s that no caller was told about", id)
			}
		}
	}
	if counts["stocked"] != 1 || counts["deducted"] != stock || len(entries) != stock+1 {
		t.Fatalf("stream holds %v (%d entries), want 1 stocked and %d deducted", counts, len(entries), stock)
	}
}

func TestRetriesAreNotSecondPurchases(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "retry-sku", 100, 1)

	t.Run("same request id from 10 goroutines", func(t *testing.T) {
		var cmds []ledger.DeductCommand
		for range 10 {
			cmds = append(cmds, ledger.MustDeductCommand("retry-sku", "alice", 1, "alice-1"))
		}
		results := fire(s.Service, cmds)
		for _, r := range results {
			if r.err != nil {
				t.Fatalf("retry failed: %v", r.err)
			}
			if r.receipt.Original() != results[0].receipt.Original() {
				t.Fatalf("receipts differ: %+v vs %+v", r.receipt, results[0].receipt)
			}
		}
	})

	t.Run("one user, 20 different request ids", func(t *testing.T) {
		var cmds []ledger.DeductCommand
		for i := range 20 {
			cmds = append(cmds, ledger.MustDeductCommand("retry-sku", "bob", 1, fmt.Sprintf("bob-%d", i)))
		}
		ok := 0
		for _, r := range fire(s.Service, cmds) {
			switch {
			case r.err == nil:
				ok++
			case !errors.Is(r.err, domain.ErrAlreadyPurchased):
				t.Fatalf("unexpected outcome: %v", r.err)
			}
		}
		if ok != 1 {
			t.Fatalf("bob bought %d times, want 1", ok)
		}
	})

	st, err := s.Service.State(context.Background(), "retry-sku")
	if err != nil {
		t.Fatal(err)
	}
	if *st.RedisStock != 98 {
		t.Fatalf("stock %d, want 98 after one purchase each by alice and bob", *st.RedisStock)
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "rel-sku", 1, 1)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rel-sku", "u1", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rel-sku", "u2", 1, "r2")); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("second buyer: %v, want sold out", err)
	}
	rel := ledger.MustReleaseCommand("rel-sku", "u1", "r1", "payment failed")
	for range 2 {
		if _, err := s.Service.Release(ctx, rel); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := s.Service.State(ctx, "rel-sku")
	if *st.RedisStock != 1 {
		t.Fatalf("stock after double release %d, want 1", *st.RedisStock)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("rel-sku", "u2", 1, "r3")); err != nil {
		t.Fatalf("released unit not sold again: %v", err)
	}
	_, err := s.Service.Release(ctx, ledger.MustReleaseCommand("rel-sku", "u1", "unknown", ""))
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown request: %v, want ErrNotFound", err)
	}
	_, err = s.Service.Release(ctx, ledger.MustReleaseCommand("no-such-sku", "u1", "r1", ""))
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown sku: %v, want ErrNotFound", err)
	}
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "input-sku", 10, 2)
	// A deduction as strings: NewDeductCommand validates the fields, the
	// service the per-user limit.
	type input struct {
		SKU, User string
		Qty       int64
		RequestID string
	}
	valid := input{SKU: "input-sku", User: "u", Qty: 1, RequestID: "r"}
	with := func(f func(*input)) input { c := valid; f(&c); return c }
	deduct := func(in input) error {
		cmd, err := ledger.NewDeductCommand(in.SKU, in.User, in.Qty, in.RequestID)
		if err == nil {
			_, err = s.Service.Deduct(ctx, cmd)
		}
		return err
	}

	cases := []struct {
		name  string
		cmd   input
		field string
	}{
		{"qty zero", with(func(c *input) { c.Qty = 0 }), "qty"},
		{"qty negative", with(func(c *input) { c.Qty = -1 }), "qty"},
		{"qty above limit", with(func(c *input) { c.Qty = 3 }), "qty"},
		{"qty absurd", with(func(c *input) { c.Qty = domain.MaxQuantity + 1 }), "qty"},
		{"empty user", with(func(c *input) { c.User = "" }), "user_id"},
		{"control char in user", with(func(c *input) { c.User = "a\nb" }), "user_id"},
		{"empty request id", with(func(c *input) { c.RequestID = "" }), "request_id"},
		{"request id 129 chars", with(func(c *input) { c.RequestID = strings.Repeat("x", 129) }), "request_id"},
		{"malformed sku", with(func(c *input) { c.SKU = "input{sku}" }), "sku"},
		{"empty sku", with(func(c *input) { c.SKU = "" }), "sku"},
	}
	stream := s.Keyspace.SKUStreamKey("input-sku")
	before, _ := s.Service.State(ctx, "input-sku")
	lenBefore := s.RedisClient.XLen(ctx, stream).Val()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := deduct(tc.cmd)
			var fe *domain.FieldError
			if !errors.Is(err, domain.ErrInvalidInput) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FieldError naming %q", err, tc.field)
			}
		})
	}
	after, _ := s.Service.State(ctx, "input-sku")
	if *after.RedisStock != *before.RedisStock || *after.RedisSeq != *before.RedisSeq {
		t.Fatalf("bad input changed redis: %d/%d -> %d/%d", *before.RedisStock, *before.RedisSeq, *after.RedisStock, *after.RedisSeq)
	}
	if n := s.RedisClient.XLen(ctx, stream).Val(); n != lenBefore {
		t.Fatalf("bad input appended to the stream: %d -> %d", lenBefore, n)
	}
}

func TestCreateSKUIsIdempotentAndRefusesRedefinition(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	cmd := ledger.CreateSKUCommand{SKU: "def-sku", Stock: 10, PerUserLimit: 2}
	if _, created, err := s.Service.CreateSKU(ctx, cmd); err != nil || !created {
		t.Fatalf("create: created=%v err=%v", created, err)
	}
	if _, created, err := s.Service.CreateSKU(ctx, cmd); err != nil || created {
		t.Fatalf("identical create: created=%v err=%v", created, err)
	}
	cmd.Stock = 11
	if _, _, err := s.Service.CreateSKU(ctx, cmd); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("redefinition: %v, want ErrConflict", err)
	}
	if _, err := s.Service.Warm(ctx, "missing-sku"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("warm undefined sku: %v, want ErrNotFound", err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("def-sku", "u", 1, "r")); !errors.Is(err, domain.ErrNotWarmed) ||
		!strings.Contains(err.Error(), "invledger sku warm def-sku") {
		t.Fatalf("deduct before warm: %v, want ErrNotWarmed saying how to warm it", err)
	}
}

// TestRewarmMidSaleNeverChangesStock warms the SKU again and again while it
// sells out.
func TestRewarmMidSaleNeverChangesStock(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "rewarm-sku", 300, 1)
	var cmds []ledger.DeductCommand
	for u := range 400 {
		cmds = append(cmds, ledger.MustDeductCommand("rewarm-sku", fmt.Sprint(u), 1, fmt.Sprint(u)))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	warms := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := s.Service.Warm(ctx, "rewarm-sku")
			if err != nil || res.Stocked {
				t.Errorf("re-warm: stocked=%v err=%v", res.Stocked, err)
				return
			}
			warms++
		}
	})
	results := fire(s.Service, cmds)
	close(stop)
	wg.Wait()
	sold := 0
	for _, r := range results {
		if r.err == nil {
			sold++
		}
	}
	st, _ := s.Service.State(ctx, "rewarm-sku")
	if sold != 300 || *st.RedisStock != 0 {
		t.Fatalf("sold %d, stock %d after %d re-warms; want 300 and 0", sold, *st.RedisStock, warms)
	}
	stocked := 0
	for _, e := range s.StreamEvents(t, "rewarm-sku") {
		if e["type"] == "stocked" {
			stocked++
		}
	}
	if stocked != 1 || warms == 0 {
		t.Fatalf("%d stocked events after %d re-warms, want 1", stocked, warms)
	}
}

func BenchmarkDeduct(b *testing.B) {
	s := stacktest.New(b)
	s.SKU(b, "bench-sku", domain.MaxQuantity, 1)
	ctx := context.Background()
	var n uint64
	var mu sync.Mutex
	// 16 × GOMAXPROCS concurrent callers, as a flash sale has: throughput
	// with many callers, not the latency of one.
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		base := n
		n += 1 << 32
		mu.Unlock()
		for i := base; pb.Next(); i++ {
			id := strconv.FormatUint(i, 36)
			if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("bench-sku", id, 1, id)); err != nil {
				b.Error(err) // Fatal must not be called from RunParallel's goroutines
				return
			}
		}
	})
}
