package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// manySKUs creates and warms n SKUs with one purchase each, and projects
// them, so every SKU has Redis state, ledger rows and a balances row.
func manySKUs(b *testing.B, s *stacktest.Stack, n int) {
	b.Helper()
	ctx := context.Background()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				sku := fmt.Sprintf("many-%06d", i)
				if _, _, err := s.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: 10, PerUserLimit: 1}); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Service.Warm(ctx, sku); err != nil {
					b.Error(err)
					return
				}
				if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "u", 1, "r")); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	s.ProjectStreams(b)
}

// BenchmarkReconcileSKUs reconciles b.N SKUs in one run; run it with
// -benchtime 10000x for the 10,000-SKU figure.
func BenchmarkReconcileSKUs(b *testing.B) {
	s := stacktest.New(b)
	manySKUs(b, s, b.N)
	rec := newReconciler(b, s, &alertSink{})
	b.ResetTimer()
	start := time.Now()
	rep, err := rec.Run(context.Background(), reconcile.Options{Trigger: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	if rep.Checked != b.N || len(rep.Drifts) != 0 {
		b.Fatalf("checked %d of %d, %d drifts", rep.Checked, b.N, len(rep.Drifts))
	}
	b.ReportMetric(took.Seconds(), "s/run")
	b.ReportMetric(float64(b.N)/took.Seconds(), "skus/s")
}

// BenchmarkVerifyAfterRestart restarts Redis under b.N SKUs and measures how
// long verification takes until every SKU sells again.
func BenchmarkVerifyAfterRestart(b *testing.B) {
	s := stacktest.New(b)
	manySKUs(b, s, b.N)
	rec := newReconciler(b, s, &alertSink{})
	ctx := context.Background()
	if err := s.Redis.Kill(); err != nil {
		b.Fatal(err)
	}
	if err := s.Redis.Restart(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for {
		if time.Since(start) > 5*time.Minute {
			b.Fatal("SKUs still fenced after 5 minutes of verification passes")
		}
		rep, err := rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "redis_restart"})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Unverified == 0 {
			if rep.Verified != b.N {
				b.Fatalf("verified %d of %d", rep.Verified, b.N)
			}
			break
		}
	}
	took := time.Since(start)
	b.ReportMetric(took.Seconds(), "s/verify")
	b.ReportMetric(float64(b.N)/took.Seconds(), "skus/s")
}
