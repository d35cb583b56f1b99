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

// BenchmarkReserveVsDeduct compares reserve's throughput with deduct's
// through RedisInventory, 64 goroutines on one Redis (appendfsync always).
// Sub-benchmark interleaved runs the two call by call, so both see the same
// load at the same moments, which a shared 2-core machine does not keep
// steady between two runs; it reports each one's mean latency and
// reserve-vs-deduct, the ratio of their throughputs at equal concurrency
// (deduct's mean latency over reserve's). Sub-benchmarks deduct and reserve
// run each alone and report calls/s; with -count they alternate, so compare
// neighbouring runs.
func BenchmarkReserveVsDeduct(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	deductSKU, reserveSKU := f.warm(b, "bench-deduct", 1_000_000_000, 1), f.warm(b, "bench-reserve", 1_000_000_000, 1)
	ttl := ttlOf(b, 3600)
	var n atomic.Int64 // unique users and request ids across every run
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
	b.Run("interleaved", func(b *testing.B) {
		var (
			turn  atomic.Int64
			spent [2]atomic.Int64 // nanoseconds: deduct, reserve
			calls [2]atomic.Int64
		)
		b.SetParallelism(32) // 64 goroutines on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				kind, start := int(turn.Add(1)%2), time.Now()
				err := call(kind)
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
	})
	for kind, name := range []string{"deduct", "reserve"} {
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := call(kind); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
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
