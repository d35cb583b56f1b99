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

	"github.com/invledger/invledger/adapters/redisinventory"
	"github.com/invledger/invledger/domain"
)

// BenchmarkReserveVsDeduct runs deduct and reserve interleaved, call by
// call, from 64 goroutines on one Redis (appendfsync always): both see the
// same load at the same moments, which a shared 2-core machine does not
// keep steady between two runs. It reports each one's mean latency, and
// reserve-vs-deduct, the ratio of their throughputs at equal concurrency
// (deduct's mean latency over reserve's).
func BenchmarkReserveVsDeduct(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	deductSKU, reserveSKU := f.warm(b, "bench-deduct", 100_000_000, 1), f.warm(b, "bench-reserve", 100_000_000, 1)
	ttl := ttlOf(b, 3600)
	var (
		n     atomic.Int64
		spent [2]atomic.Int64 // nanoseconds: deduct, reserve
		calls [2]atomic.Int64
	)
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := n.Add(1)
			user, req := must(domain.NewUserID(fmt.Sprint("u", k))), must(domain.NewRequestID(fmt.Sprint("r", k)))
			kind, start := int(k%2), time.Now()
			var err error
			if kind == 0 {
				_, err = f.inv.Deduct(ctx, deductSKU, user, must(domain.NewQuantity(1)), req, uuid.NewString())
			} else {
				_, err = f.inv.Reserve(ctx, reserveSKU, user, must(domain.NewQuantity(1)), req, ttl, "", uuid.NewString())
			}
			spent[kind].Add(int64(time.Since(start)))
			calls[kind].Add(1)
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	mean := func(kind int) float64 { return float64(spent[kind].Load()) / float64(max(calls[kind].Load(), 1)) }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(mean(0)/1e6, "deduct-ms")
	b.ReportMetric(mean(1)/1e6, "reserve-ms")
	b.ReportMetric(mean(0)/mean(1), "reserve-vs-deduct")
}

// BenchmarkSweeper reserves b.N holds of 1 s over 16 SKUs, then measures
// two things: how fast one Sweep pass expires them all once they are due
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
	n, err := sw.Sweep(ctx)
	b.StopTimer()
	if err != nil || n != holds {
		b.Fatalf("swept %d of %d: %v", n, holds, err)
	}
	b.ReportMetric(float64(holds)/b.Elapsed().Seconds(), "holds/s")

	var (
		mu       sync.Mutex
		lateness []time.Duration
	)
	live := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{
		OnExpired: func(_ domain.Hold, d time.Duration) { mu.Lock(); lateness = append(lateness, d); mu.Unlock() }}))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = live.Run(runCtx) }()
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
