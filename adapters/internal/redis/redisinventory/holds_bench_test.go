package redisinventory_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// BenchmarkReserveVsDeduct compares reserve's throughput with deduct's
// through RedisInventory, 64 goroutines on one Redis (appendfsync always).
// It alternates phases of up to 1,000 calls, all goroutines on one kind at
// a time, so both see the machine in the same states, and reports each
// one's calls/s and reserve-vs-deduct, the ratio of the two. Interleaving
// the two call by call would not measure it: calls made at the same moment
// share Redis's fsync (and, on one SKU, a batch), so their latencies come
// out equal whatever each costs.
func BenchmarkReserveVsDeduct(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	deductSKU, reserveSKU := f.warm(b, "bench-deduct", 1_000_000_000, 1), f.warm(b, "bench-reserve", 1_000_000_000, 1)
	ttl := ttlOf(b, 3600)
	var (
		n     atomic.Int64 // unique users and request ids
		spent [2]time.Duration
		calls [2]int
	)
	call := func(kind int) error {
		k := n.Add(1)
		user, req := must(domain.NewUserID(fmt.Sprint("u", k))), must(domain.NewRequestID(fmt.Sprint("r", k)))
		if kind == 0 {
			_, err := f.inv.Deduct(ctx, deductSKU, user, must(domain.NewQuantity(1)), req, uuid.NewString())
			return err
		}
		_, err := f.inv.Reserve(ctx, reserveSKU, user, must(domain.NewQuantity(1)), req, ttl, "", uuid.NewString())
		return err
	}
	b.ResetTimer()
	for phase, done := 0, 0; done < b.N; phase++ {
		kind, size := phase%2, min(1000, b.N-done)
		var (
			wg   sync.WaitGroup
			left atomic.Int64
		)
		left.Store(int64(size))
		start := time.Now()
		for range 64 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if err := call(kind); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		spent[kind] += time.Since(start)
		calls[kind] += size
		done += size
	}
	rate := func(kind int) float64 { return float64(calls[kind]) / max(spent[kind].Seconds(), 1e-9) }
	b.ReportMetric(rate(0), "deduct/s")
	b.ReportMetric(rate(1), "reserve/s")
	if calls[1] > 0 {
		b.ReportMetric(rate(1)/rate(0), "reserve-vs-deduct")
	}
}

// BenchmarkSweeper reserves b.N holds of 1 s over 16 SKUs, then measures
// two things: how fast one ExpireDue call expires them all once they are due
// (holds/s), and the expiry lateness (Redis clock at expiry minus
// deadline) of a sweeper running at its default interval while as many
// fall due together (p50, p99). Run it with -benchtime 10000x and 50000x.
func BenchmarkSweeper(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	holds := b.N
	skus := make([]domain.SKUID, 16)
	for i := range skus {
		skus[i] = f.warm(b, fmt.Sprintf("sweep-%d", i), int64(holds), 1)
	}
	round := 0
	reserveAll := func() {
		round++
		var (
			wg   sync.WaitGroup
			next atomic.Int64
		)
		for range 64 {
			wg.Go(func() {
				for k := next.Add(1); k <= int64(holds); k = next.Add(1) {
					user := must(domain.NewUserID(fmt.Sprintf("u%d-%d", round, k)))
					req := must(domain.NewRequestID(fmt.Sprintf("r%d-%d", round, k)))
					if _, err := f.inv.Reserve(ctx, skus[k%16], user, must(domain.NewQuantity(1)), req, ttlOf(b, 1), "", uuid.NewString()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.StopTimer()
	reserveAll()
	time.Sleep(1100 * time.Millisecond)
	sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{}))
	b.StartTimer()
	expired, err := sw.ExpireDue(ctx)
	b.StopTimer()
	if err != nil || len(expired) != holds {
		b.Fatalf("swept %d of %d: %v", len(expired), holds, err)
	}
	b.ReportMetric(float64(holds)/b.Elapsed().Seconds(), "holds/s")

	var (
		mu       sync.Mutex
		lateness []time.Duration
	)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sweepEvery(runCtx, sw, ledger.DefaultExpiryInterval, func(x ledger.ExpiredHold) {
			mu.Lock()
			lateness = append(lateness, x.Lateness)
			mu.Unlock()
		})
	}()
	reserveAll()
	for deadline := time.Now().Add(60 * time.Second); ; {
		mu.Lock()
		got := len(lateness)
		mu.Unlock()
		if got == holds {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d holds expired within 60 s", got, holds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	slices.Sort(lateness)
	b.ReportMetric(lateness[len(lateness)/2].Seconds()*1000, "lateness-p50-ms")
	b.ReportMetric(lateness[len(lateness)*99/100].Seconds()*1000, "lateness-p99-ms")
}
