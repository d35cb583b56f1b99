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

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

func ttlOf(t testing.TB, seconds int64) domain.HoldTTL {
	t.Helper()
	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	return must(cfg.NewHoldTTL(&seconds))
}

func reserve(t *testing.T, f *fixture, sku domain.SKUID, user string, qty int64, req string, ttl domain.HoldTTL) (domain.Hold, error) {
	t.Helper()
	return f.inv.Reserve(context.Background(), sku, must(domain.NewUserID(user)), must(domain.NewQuantity(qty)),
		must(domain.NewRequestID(req)), ttl, "", uuid.NewString())
}

func holdID(h domain.Hold) domain.HoldID { return must(domain.NewHoldID(h.HoldID)) }

// holdEvents reads the partition stream of sku as parsed events.
func holdEvents(t *testing.T, f *fixture, sku string) []domain.Event {
	t.Helper()
	msgs := must(f.client.XRange(context.Background(), f.keys.SKUStreamKey(sku), "-", "+").Result())
	events := make([]domain.Event, 0, len(msgs))
	for _, m := range msgs {
		for _, e := range must(streamentry.ParseEvents(streamentry.MessageFields(m))) {
			if e.SKU == sku {
				events = append(events, e)
			}
		}
	}
	return events
}

// foldStream folds sku's stream and checks it against Redis's own stock:
// the events a script appended must fold to what it wrote.
func foldStream(t *testing.T, f *fixture, sku domain.SKUID) *domain.SKUState {
	t.Helper()
	s, err := domain.Fold(sku.String(), holdEvents(t, f, sku.String()))
	if err != nil {
		t.Fatal(err)
	}
	st := must(f.inv.State(context.Background(), sku))
	if st.Stock != s.Stock || st.Seq != s.Seq {
		t.Fatalf("redis stock %d seq %d, stream folds to stock %d seq %d", st.Stock, st.Seq, s.Stock, s.Seq)
	}
	open := must(f.client.HMGet(context.Background(), f.keys.SKUKey(sku.String()), "held", "holds").Result())
	if fmt.Sprint(open) != fmt.Sprint([]any{fmt.Sprint(s.Held), fmt.Sprint(s.OpenHolds())}) && !(open[0] == nil && s.Held == 0 && len(s.Holds) == 0) {
		t.Fatalf("redis held and open holds %v, stream folds to %d and %d", open, s.Held, s.OpenHolds())
	}
	receipts, buyers := f.records(t, sku.String())
	if len(buyers) != len(s.Buyers) {
		t.Fatalf("redis buyers %v, stream folds to %v", buyers, s.Buyers)
	}
	for u, n := range s.Buyers {
		if buyers[u] != fmt.Sprint(n) {
			t.Fatalf("redis buyers %v, stream folds to %v", buyers, s.Buyers)
		}
	}
	// A receipt per request id that deducted or reserved, whatever became
	// of it since.
	reqs := map[string]bool{}
	for req := range s.Requests {
		reqs[req] = true
	}
	for _, h := range s.Holds {
		reqs[h.RequestID] = true
	}
	if len(receipts) != len(reqs) {
		t.Fatalf("redis receipts %v, stream folds to request ids %v", receipts, reqs)
	}
	for req := range reqs {
		if _, ok := receipts[req]; !ok {
			t.Fatalf("redis receipts %v, stream folds to request ids %v", receipts, reqs)
		}
	}
	return s
}

func TestReserveConfirmIsASaleThatReleaseGivesBack(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "hold-confirm", 10, 2)

		h := must(reserve(t, f, sku, "u1", 2, "r1", ttlOf(t, 60)))
		if h.Status != domain.HoldHeld || h.Qty != 2 || h.Remaining != 8 || h.Seq != 2 || h.User != "u1" ||
			h.HoldID != domain.HoldIDFor(sku, must(domain.NewRequestID("r1"))).String() {
			t.Fatalf("reserve = %+v", h)
		}
		if d := time.Until(h.ExpiresAt); d < 55*time.Second || d > 65*time.Second {
			t.Fatalf("expires in %s, want about 60s", d)
		}
		// The limit counts the held units: a deduction over it is refused.
		if _, err := deduct(t, f, sku, "u1", 1, "d1", uuid.NewString()); !errors.Is(err, domain.ErrAlreadyPurchased) {
			t.Fatalf("deduct over a held limit = %v", err)
		}
		again := must(reserve(t, f, sku, "u1", 2, "r1", ttlOf(t, 60)))
		if !again.Replayed || again.Seq != h.Seq || again.ExpiresAt != h.ExpiresAt || again.EventID != h.EventID {
			t.Fatalf("retry = %+v, want the original %+v", again, h)
		}
		if _, err := reserve(t, f, sku, "u1", 1, "r1", ttlOf(t, 60)); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("request id reused for another qty = %v", err)
		}
		// A hold's request id is not a deduction's, nor can it be released while held.
		if _, err := deduct(t, f, sku, "u1", 2, "r1", uuid.NewString()); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("deduct with a hold's request id = %v", err)
		}
		if _, err := f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("r1")), domain.Reason{}, uuid.NewString()); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("release of a held hold = %v", err)
		}

		c := must(f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString()))
		if c.Status != domain.HoldConfirmed || c.EndSeq != 3 || c.Seq != h.Seq {
			t.Fatalf("confirm = %+v", c)
		}
		c2 := must(f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString()))
		if c2 != c {
			t.Fatalf("confirm twice:\n%+v\n%+v", c, c2)
		}
		if _, err := f.inv.CancelHold(ctx, sku, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrHoldConfirmed) || domain.CodeOf(err) != domain.CodeHoldConfirmed {
			t.Fatalf("cancel after confirm = %v", err)
		}
		if st := must(f.inv.State(ctx, sku)); st.Stock != 8 || st.Seq != 3 {
			t.Fatalf("after confirm stock %d seq %d, want 8 3", st.Stock, st.Seq)
		}
		rel := must(f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("r1")), domain.Reason{}, uuid.NewString()))
		if rel.AlreadyReleased || rel.Seq != 4 {
			t.Fatalf("release of a confirmed hold = %+v", rel)
		}
		s := foldStream(t, f, sku)
		if s.Stock != 10 || s.Held != 0 || s.Sold != 0 || len(s.Buyers) != 0 {
			t.Fatalf("folded %+v", s)
		}
		// The release names the hold, and from then on every script that
		// answers about the hold says released.
		events := holdEvents(t, f, sku.String())
		if e := events[len(events)-1]; e.Type != domain.EventReleased || e.HoldID != h.HoldID {
			t.Fatalf("the release's event = %+v, want hold_id %s", e, h.HoldID)
		}
		if got := must(f.inv.Hold(ctx, sku, holdID(h))); got.Status != domain.HoldReleased {
			t.Fatalf("hold after its release = %+v", got)
		}
		for _, end := range []func(context.Context, domain.SKUID, domain.HoldID, string) (domain.Hold, error){f.inv.ConfirmHold, f.inv.CancelHold} {
			if _, err := end(ctx, sku, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrHoldReleased) || domain.CodeOf(err) != domain.CodeHoldReleased {
				t.Fatalf("end of a released hold = %v", err)
			}
		}
		if again := must(reserve(t, f, sku, "u1", 2, "r1", ttlOf(t, 60))); !again.Replayed || again.Status != domain.HoldReleased {
			t.Fatalf("retried reserve of a released hold = %+v", again)
		}
	})
}

func TestCancelGivesUnitsAndAllowanceBackOnce(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "hold-cancel", 5, 3)
		h := must(reserve(t, f, sku, "u1", 3, "r1", ttlOf(t, 60)))
		c := must(f.inv.CancelHold(ctx, sku, holdID(h), uuid.NewString()))
		if c.Status != domain.HoldCancelled {
			t.Fatalf("cancel = %+v", c)
		}
		before := f.snapshot(t)
		if c2 := must(f.inv.CancelHold(ctx, sku, holdID(h), uuid.NewString())); c2 != c {
			t.Fatalf("cancel twice:\n%+v\n%+v", c, c2)
		}
		if _, err := f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrHoldCancelled) {
			t.Fatalf("confirm after cancel = %v", err)
		}
		assertSame(t, before, f.snapshot(t))
		// The allowance is free again: the same user may take all 3 again.
		must(deduct(t, f, sku, "u1", 3, "d1", uuid.NewString()))
		s := foldStream(t, f, sku)
		if s.Stock != 2 || s.Sold != 3 || s.Held != 0 {
			t.Fatalf("folded %+v", s)
		}
	})
}

func TestBadHoldReferencesChangeNothing(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		a := f.warm(t, "hold-a", 5, 1)
		b := f.warm(t, "hold-b", 5, 1)
		h := must(reserve(t, f, a, "u1", 1, "r1", ttlOf(t, 60)))
		before := f.snapshot(t)
		unknown := must(domain.NewHoldID(uuid.NewString()))
		for name, call := range map[string]func() error{
			"confirm of another sku's hold": func() error { _, err := f.inv.ConfirmHold(ctx, b, holdID(h), uuid.NewString()); return err },
			"cancel of another sku's hold":  func() error { _, err := f.inv.CancelHold(ctx, b, holdID(h), uuid.NewString()); return err },
			"show of another sku's hold":    func() error { _, err := f.inv.Hold(ctx, b, holdID(h)); return err },
			"confirm of an unknown hold":    func() error { _, err := f.inv.ConfirmHold(ctx, a, unknown, uuid.NewString()); return err },
			"show of an unknown hold":       func() error { _, err := f.inv.Hold(ctx, a, unknown); return err },
		} {
			if err := call(); !errors.Is(err, domain.ErrHoldNotFound) || domain.CodeOf(err) != domain.CodeNotFound {
				t.Errorf("%s = %v, want hold not found", name, err)
			}
		}
		unwarmed := must(domain.NewSKUID("hold-none"))
		if _, err := f.inv.ConfirmHold(ctx, unwarmed, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrNotWarmed) {
			t.Errorf("confirm on a SKU not in Redis = %v", err)
		}
		if _, err := reserve(t, f, a, "u2", 2, "r2", ttlOf(t, 60)); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("reserve over the limit = %v", err)
		}
		assertSame(t, before, f.snapshot(t))
	})
}

func TestHoldPastItsDeadlineIsExpiredAndTheSweeperReturnsItsUnits(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "hold-expire", 4, 2)
		sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{}))
		h := must(reserve(t, f, sku, "u1", 2, "r1", ttlOf(t, 1)))
		if n := len(must(sw.ExpireDue(ctx))); n != 0 {
			t.Fatalf("swept %d holds before the deadline", n)
		}
		time.Sleep(time.Until(h.ExpiresAt) + 20*time.Millisecond)
		before := f.snapshot(t)
		if _, err := f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrHoldExpired) || domain.CodeOf(err) != domain.CodeHoldExpired {
			t.Fatalf("confirm after the deadline = %v", err)
		}
		if _, err := f.inv.CancelHold(ctx, sku, holdID(h), uuid.NewString()); !errors.Is(err, domain.ErrHoldExpired) {
			t.Fatalf("cancel after the deadline = %v", err)
		}
		if shown := must(f.inv.Hold(ctx, sku, holdID(h))); shown.Status != domain.HoldExpired {
			t.Fatalf("show after the deadline = %+v, want expired in effect", shown)
		}
		assertSame(t, before, f.snapshot(t))
		if x := must(sw.ExpireDue(ctx)); len(x) != 1 || x[0].Hold.HoldID != h.HoldID || x[0].Hold.Status != domain.HoldExpired ||
			x[0].Lateness < 0 || x[0].Lateness > 5*time.Second {
			t.Fatalf("swept %+v, want hold %s expired with its lateness", x, h.HoldID)
		}
		if n := len(must(sw.ExpireDue(ctx))); n != 0 {
			t.Fatalf("second sweep expired %d", n)
		}
		if left := must(f.client.ZCard(ctx, f.keys.SKUExpiryKey(sku.String())).Result()); left != 0 {
			t.Fatalf("%d entries left in the expiry set", left)
		}
		s := foldStream(t, f, sku)
		if s.Stock != 4 || s.Held != 0 || s.Holds[h.HoldID].Status != domain.HoldExpired || len(s.Buyers) != 0 {
			t.Fatalf("folded %+v", s)
		}
	})
}

// sweepEvery expires the due holds every interval until ctx ends, as
// ledger.HoldExpiry runs a sweeper, and hands each expired hold to expired.
func sweepEvery(ctx context.Context, sw *redisinventory.Sweeper, interval time.Duration, expired func(ledger.ExpiredHold)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		holds, _ := sw.ExpireDue(ctx)
		for _, x := range holds {
			expired(x)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TestRaceAtTheDeadline confirms 1,000 holds at the moment each expires,
// with three sweepers running: each hold ends exactly once, as the caller
// was told, and the units match the outcomes.
func TestRaceAtTheDeadline(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const holds = 1000
		sku := f.warm(t, "hold-race", holds, 1)
		reserved := make([]domain.Hold, holds)
		var wg sync.WaitGroup
		for i := range holds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := reserve(t, f, sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i), ttlOf(t, 1))
				if err != nil {
					t.Error(err)
				}
				reserved[i] = h
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		var sweepers sync.WaitGroup
		for range 3 {
			sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{}))
			sweepers.Go(func() { sweepEvery(ctx, sw, 5*time.Millisecond, func(ledger.ExpiredHold) {}) })
		}
		var confirmed, refused atomic.Int64
		told := make([]domain.HoldStatus, holds)
		for i, h := range reserved {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Within 20 ms either side of the deadline, so confirms race both
				// the deadline and the sweepers.
				time.Sleep(time.Until(h.ExpiresAt.Add(time.Duration(i%41-20) * time.Millisecond)))
				_, err := f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString())
				switch {
				case err == nil:
					confirmed.Add(1)
					told[i] = domain.HoldConfirmed
				case errors.Is(err, domain.ErrHoldExpired):
					refused.Add(1)
					told[i] = domain.HoldExpired
				default:
					t.Errorf("confirm %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for must(f.client.ZCard(ctx, f.keys.SKUExpiryKey(sku.String())).Result()) > 0 {
			if time.Now().After(deadline) {
				t.Fatal("the sweepers left holds unexpired for 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		sweepers.Wait()

		ends := map[string]int{}
		for _, e := range holdEvents(t, f, sku.String()) {
			if e.Type == domain.EventConfirmed || e.Type == domain.EventExpired {
				ends[e.HoldID]++
			}
		}
		s := foldStream(t, f, sku) // refuses a hold that ended twice
		for i, h := range reserved {
			if ends[h.HoldID] != 1 || s.Holds[h.HoldID].Status != told[i] {
				t.Fatalf("hold %d ended %d times, as %s; the caller was told %s", i, ends[h.HoldID], s.Holds[h.HoldID].Status, told[i])
			}
		}
		if s.Stock != refused.Load() || s.Sold != confirmed.Load() || s.Held != 0 {
			t.Fatalf("stock %d sold %d held %d; %d confirmed, %d expired", s.Stock, s.Sold, s.Held, confirmed.Load(), refused.Load())
		}
		t.Logf("%d confirmed, %d expired at the deadline", confirmed.Load(), refused.Load())
	})
}

// One sweeper call expires several holds of a SKU and answers each one:
// held and due ones expire, a confirmed and a cancelled one stay as they
// ended, each with one event.
func TestOneSweepCallEndsEachDueHoldOfASKUOnce(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "hold-batch", 10, 1)
		var hs []domain.Hold
		for i := range 5 {
			hs = append(hs, must(reserve(t, f, sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i), ttlOf(t, 1))))
		}
		must(f.inv.ConfirmHold(ctx, sku, holdID(hs[0]), uuid.NewString()))
		must(f.inv.CancelHold(ctx, sku, holdID(hs[1]), uuid.NewString()))
		sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{PerCall: 1000}))
		time.Sleep(time.Until(hs[4].ExpiresAt) + 20*time.Millisecond)
		if expired := must(sw.ExpireDue(ctx)); len(expired) != 3 {
			t.Fatalf("swept %+v, want the 3 held holds", expired)
		}
		if n := len(must(sw.ExpireDue(ctx))); n != 0 {
			t.Fatalf("second sweep expired %d", n)
		}
		ends := map[string]int{}
		for _, e := range holdEvents(t, f, sku.String()) {
			if e.Type != domain.EventReserved {
				ends[e.HoldID]++
			}
		}
		s := foldStream(t, f, sku)
		want := []domain.HoldStatus{domain.HoldConfirmed, domain.HoldCancelled, domain.HoldExpired, domain.HoldExpired, domain.HoldExpired}
		for i, h := range hs {
			if ends[h.HoldID] != 1 || s.Holds[h.HoldID].Status != want[i] {
				t.Fatalf("hold %d ended %d times, as %s, want once as %s", i, ends[h.HoldID], s.Holds[h.HoldID].Status, want[i])
			}
		}
		if s.Stock != 9 || s.Sold != 1 || s.Held != 0 || len(s.Buyers) != 1 {
			t.Fatalf("folded %+v", s)
		}
	})
}

// TestSweeperDropsTheExpiryEntriesOfEndedHolds: an entry left in the
// expiry set for a hold that has already ended (a hand edit, a partial
// restore) is dropped by the first sweep that reaches it. Kept, such
// entries come up first at every pass, and a batch of them would hold back
// the live holds due behind them for ever.
func TestSweeperDropsTheExpiryEntriesOfEndedHolds(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "hold-stale-entry", 10, 1)
		confirmed := must(reserve(t, f, sku, "u0", 1, "r0", ttlOf(t, 1)))
		cancelled := must(reserve(t, f, sku, "u1", 1, "r1", ttlOf(t, 1)))
		live := must(reserve(t, f, sku, "u2", 1, "r2", ttlOf(t, 1)))
		must(f.inv.ConfirmHold(ctx, sku, holdID(confirmed), uuid.NewString()))
		must(f.inv.CancelHold(ctx, sku, holdID(cancelled), uuid.NewString()))
		expiry := f.keys.SKUExpiryKey(sku.String())
		for _, h := range []domain.Hold{confirmed, cancelled} {
			if err := f.client.ZAdd(ctx, expiry, redis.Z{Score: 1, Member: sku.String() + " " + h.HoldID}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{Batch: 2}))
		time.Sleep(time.Until(live.ExpiresAt) + 20*time.Millisecond)
		swept := len(must(sw.ExpireDue(ctx))) + len(must(sw.ExpireDue(ctx)))
		if left := must(f.client.ZRange(ctx, expiry, 0, -1).Result()); swept != 1 || len(left) != 0 {
			t.Fatalf("two sweeps expired %d holds and left %v in the expiry set; want the live hold expired and nothing left", swept, left)
		}
		s := foldStream(t, f, sku)
		if s.Holds[confirmed.HoldID].Status != domain.HoldConfirmed || s.Holds[cancelled.HoldID].Status != domain.HoldCancelled ||
			s.Holds[live.HoldID].Status != domain.HoldExpired || s.Stock != 9 || s.Sold != 1 {
			t.Fatalf("folded %+v", s)
		}
	})
}

func TestSweeperConfigRefusesPerCallOutOfRange(t *testing.T) {
	for _, per := range []int{-1, 1001} {
		if err := (redisinventory.SweeperConfig{PerCall: per}).Validate(); err == nil || !strings.Contains(err.Error(), "PerCall") {
			t.Errorf("PerCall %d: %v", per, err)
		}
	}
}

// TestRecordCountsStayExactWhereARecordIsGone: a release of a buyer whose
// count is gone (a closed SKU's buyers dropped to SQL) and a confirm of a
// hold whose reserve receipt is gone (a hand edit) write the records they
// must, and a one-hash SKU's counts of receipts and buyers still count its
// r: and u: fields (fixture.records checks them).
func TestRecordCountsStayExactWhereARecordIsGone(t *testing.T) {
	t.Parallel()
	forEachLayout(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		sku := f.warm(t, "records-gone", 10, 2)
		s := sku.String()
		// drop removes a record as a script would, counts included.
		drop := func(key, field, counter string) {
			t.Helper()
			if must(f.client.HDel(ctx, key, field).Result()) != 1 {
				t.Fatalf("no field %s in %s", field, key)
			}
			if key == f.keys.SKUKey(s) {
				must(f.client.HIncrBy(ctx, key, counter, -1).Result())
			}
		}
		must(deduct(t, f, sku, "u1", 2, "d1", uuid.NewString()))
		cancelled := must(reserve(t, f, sku, "u2", 1, "r2", ttlOf(t, 60)))
		confirmed := must(reserve(t, f, sku, "u3", 1, "r3", ttlOf(t, 60)))
		f.records(t, s)

		key, field := f.countAt(t, s, "u1")
		drop(key, field, "buyers")
		must(f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("d1")), domain.Reason{}, uuid.NewString()))
		if receipts, counts := f.records(t, s); len(receipts) != 3 || fmt.Sprint(counts) != "map[u2:1 u3:1]" {
			t.Fatalf("after the release of a buyer without a count: receipts %v, counts %v", receipts, counts)
		}

		key, field = f.receiptAt(t, s, "r3")
		drop(key, field, "receipts")
		must(f.inv.ConfirmHold(ctx, sku, holdID(confirmed), uuid.NewString()))
		must(f.inv.CancelHold(ctx, sku, holdID(cancelled), uuid.NewString()))
		receipts, counts := f.records(t, s)
		if len(receipts) != 3 || fmt.Sprint(counts) != "map[u3:1]" || strings.HasPrefix(receipts["r3"], "H") || receipts["r3"] == "" {
			t.Fatalf("after the confirm of a hold without a receipt and a cancel: receipts %v, counts %v", receipts, counts)
		}
		if st := must(f.inv.State(ctx, sku)); st.Stock != 9 || st.Held != 0 {
			t.Fatalf("state %+v, want stock 9 and nothing held", st)
		}
	})
}

// TestAnUnknownLayoutIsRefusedBeforeAnyRecord: a SKU whose layout field
// names no layout this version knows would send the scripts to the wrong
// place for its records, so each one that reads them refuses it as a
// corrupt SKU state, and writes nothing.
func TestAnUnknownLayoutIsRefusedBeforeAnyRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	sku := f.warm(t, "layout-unknown", 10, 2)
	must(deduct(t, f, sku, "u1", 1, "d1", uuid.NewString()))
	h := must(reserve(t, f, sku, "u2", 1, "r2", ttlOf(t, 60)))
	if err := f.client.HSet(ctx, f.keys.SKUKey(sku.String()), "layout", "two-hashes").Err(); err != nil {
		t.Fatal(err)
	}
	before := f.snapshot(t)
	for name, call := range map[string]func() error{
		"release": func() error {
			_, err := f.inv.Release(ctx, sku, must(domain.NewUserID("u1")), must(domain.NewRequestID("d1")), domain.Reason{}, uuid.NewString())
			return err
		},
		"confirm": func() error { _, err := f.inv.ConfirmHold(ctx, sku, holdID(h), uuid.NewString()); return err },
		"cancel":  func() error { _, err := f.inv.CancelHold(ctx, sku, holdID(h), uuid.NewString()); return err },
		"show":    func() error { _, err := f.inv.Hold(ctx, sku, holdID(h)); return err },
		"deduct":  func() error { _, err := deduct(t, f, sku, "u3", 1, "d3", uuid.NewString()); return err },
	} {
		if err := call(); !errors.Is(err, domain.ErrCorruptRecord) || !strings.Contains(fmt.Sprint(err), `layout is "two-hashes"`) {
			t.Errorf("%s on a SKU of an unknown layout = %v, want a corrupt SKU state naming its layout", name, err)
		}
	}
	assertSame(t, before, f.snapshot(t))
}
