package recovering

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/invledger/invledger/domain"
)

// clock is a time the test moves; the tracker reads it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTracker() (*Tracker, *clock) {
	c := &clock{now: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	return New(c.Now), c
}

func sku(t testing.TB, s string) domain.SKUID {
	t.Helper()
	id, err := domain.NewSKUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The errors as the purchase path returns them: wrapped, naming the SKU.
var (
	errRecovering = fmt.Errorf("%w: sku tv-1 is being verified after a Redis restart", domain.ErrRecovering)
	errCorrupt    = fmt.Errorf("receipt of request r1: %w", domain.ErrCorruptRecord)
	errSoldOut    = fmt.Errorf("%w: sku tv-1", domain.ErrSoldOut)
	errRedisDown  = fmt.Errorf("deduct: dial tcp: %w", domain.ErrUnavailable)
)

func wantSnapshot(t *testing.T, tr *Tracker, want Snapshot, note string) {
	t.Helper()
	if got := tr.Snapshot(); got != want {
		t.Fatalf("snapshot %+v, want %+v", got, want)
	}
	if got := tr.Note(); got != note {
		t.Fatalf("note %q, want %q", got, note)
	}
}

// TestARefusalPastTheBoundIsReportedUntilTheSKUAnswersOtherwise follows a
// SKU through a stuck recovery: its refusals, retried, count from the
// first; past Bound the note says so; a sale ends it.
func TestARefusalPastTheBoundIsReportedUntilTheSKUAnswersOtherwise(t *testing.T) {
	tr, c := newTracker()
	tv, phone := sku(t, "tv-1"), sku(t, "phone-1")
	wantSnapshot(t, tr, Snapshot{}, "ok")

	tr.Observe(tv, errRecovering)
	tr.Observe(phone, nil)
	wantSnapshot(t, tr, Snapshot{Refusing: 1}, "ok")

	// Buyers retry every few seconds; the refusal counts from the first.
	for range 5 {
		c.advance(20 * time.Second)
		tr.Observe(tv, errRecovering)
	}
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: 100 * time.Second}, "ok")
	c.advance(Bound - 100*time.Second)
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: Bound}, "ok")
	c.advance(time.Second)
	tr.Observe(phone, errCorrupt)
	wantSnapshot(t, tr, Snapshot{Refusing: 2, Longest: Bound + time.Second, OverBound: 1}, "1 sku over 2m0s")

	// A Redis outage says nothing of the SKU: still stuck.
	tr.Observe(tv, errRedisDown)
	wantSnapshot(t, tr, Snapshot{Refusing: 2, Longest: Bound + time.Second, OverBound: 1}, "1 sku over 2m0s")

	// A sale, or a refusal of the SKU's own, ends the run.
	tr.Observe(tv, nil)
	wantSnapshot(t, tr, Snapshot{Refusing: 1}, "ok")
	tr.Observe(phone, errSoldOut)
	wantSnapshot(t, tr, Snapshot{}, "ok")
	if n := tr.n.Load(); n != 0 {
		t.Fatalf("nothing tracked, but the count the sale path reads is %d", n)
	}

	// Refused again: a new run, from now.
	c.advance(time.Hour)
	tr.Observe(tv, errRecovering)
	c.advance(time.Second)
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: time.Second}, "ok")
}

// TestASKUNoOneRetriesIsForgotten: past Forget without a refusal a SKU no
// longer counts, whatever its age, and a refusal after that silence
// starts a new run.
func TestASKUNoOneRetriesIsForgotten(t *testing.T) {
	tr, c := newTracker()
	tv := sku(t, "tv-1")
	for range 7 {
		tr.Observe(tv, errRecovering)
		c.advance(Forget)
	}
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: 7 * Forget, OverBound: 1}, "1 sku over 2m0s")
	c.advance(time.Nanosecond)
	wantSnapshot(t, tr, Snapshot{}, "ok")
	if n := tr.n.Load(); n != 0 {
		t.Fatalf("a forgotten SKU is still counted: %d", n)
	}

	tr.Observe(tv, errRecovering)
	c.advance(time.Second)
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: time.Second}, "ok")
	// A run gone silent, then refused again before any read: from then.
	c.advance(Forget + time.Second)
	tr.Observe(tv, errRecovering)
	c.advance(time.Second)
	wantSnapshot(t, tr, Snapshot{Refusing: 1, Longest: time.Second}, "ok")
}

// TestTheNoteCountsEverySKUOverTheBound names how many, not which: SKU
// ids stay in the log, off the unauthenticated probe.
func TestTheNoteCountsEverySKUOverTheBound(t *testing.T) {
	tr, c := newTracker()
	// Three SKUs refused from the start, one from a minute in, each
	// retried every 20 s, until 2 minutes in.
	for step := range 7 {
		for i := range 3 {
			tr.Observe(sku(t, fmt.Sprintf("stuck-%d", i)), errRecovering)
		}
		if step >= 3 {
			tr.Observe(sku(t, "late-1"), errRecovering)
		}
		if step < 6 {
			c.advance(20 * time.Second)
		}
	}
	c.advance(time.Second)
	wantSnapshot(t, tr, Snapshot{Refusing: 4, Longest: Bound + time.Second, OverBound: 3}, "3 skus over 2m0s")
	if note := tr.Note(); strings.Contains(note, "stuck-") {
		t.Fatalf("the note names a SKU: %q", note)
	}
}

// TestTheGaugesReadTheTrackerAtScrapeTime registers the gauges and reads
// them as Prometheus would.
func TestTheGaugesReadTheTrackerAtScrapeTime(t *testing.T) {
	tr, c := newTracker()
	reg := prometheus.NewRegistry()
	tr.Register(reg)
	gauges := func() string {
		t.Helper()
		var b strings.Builder
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			fmt.Fprintf(&b, "%s %g;", f.GetName(), f.GetMetric()[0].GetGauge().GetValue())
		}
		return b.String()
	}
	if got, want := gauges(), "invledger_recovering_longest_seconds 0;invledger_recovering_skus 0;"; got != want {
		t.Fatalf("before any refusal: %s, want %s", got, want)
	}
	tr.Observe(sku(t, "tv-1"), errRecovering)
	c.advance(1500 * time.Millisecond)
	tr.Observe(sku(t, "phone-1"), errRecovering)
	if got, want := gauges(), "invledger_recovering_longest_seconds 1.5;invledger_recovering_skus 2;"; got != want {
		t.Fatalf("two SKUs refusing: %s, want %s", got, want)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}

// TestConcurrentAnswersKeepTheCountTheSalePathReads races refusals, sales
// and scrapes over a few SKUs (run with -race): once they stop, the count
// the sale path reads first is the number of SKUs tracked, so it is never
// left above zero with nothing tracked, nor at zero with a SKU stuck.
func TestConcurrentAnswersKeepTheCountTheSalePathReads(t *testing.T) {
	tr, c := newTracker()
	skus := []domain.SKUID{sku(t, "a"), sku(t, "b"), sku(t, "c")}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				s := skus[(g+i)%len(skus)]
				switch i % 4 {
				case 0, 1:
					tr.Observe(s, errRecovering)
				case 2:
					tr.Observe(s, nil)
				default:
					tr.Observe(s, errSoldOut)
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			c.advance(Forget / 3)
			tr.Snapshot()
		}
	})
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()

	entries := 0
	tr.skus.Range(func(any, any) bool { entries++; return true })
	if n := tr.n.Load(); n != int64(entries) {
		t.Fatalf("the count is %d, the map holds %d", n, entries)
	}
	for _, s := range skus {
		tr.Observe(s, nil)
	}
	if n, s := tr.n.Load(), tr.Snapshot(); n != 0 || s != (Snapshot{}) {
		t.Fatalf("every SKU sold, yet the count is %d and the snapshot %+v", n, s)
	}
}

// BenchmarkObserveSale is the cost a sale pays: with no SKU tracked
// (nothing recovering, the usual case), and while another SKU is.
func BenchmarkObserveSale(b *testing.B) {
	tv := sku(b, "tv-1")
	b.Run("none tracked", func(b *testing.B) {
		tr := New(time.Now)
		for b.Loop() {
			tr.Observe(tv, nil)
		}
	})
	b.Run("another tracked", func(b *testing.B) {
		tr := New(time.Now)
		tr.Observe(sku(b, "stuck-1"), errRecovering)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tr.Observe(tv, nil)
			}
		})
	})
}
