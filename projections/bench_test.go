package projections_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// fillStreams sells n units spread over skus SKUs through the library,
// from 1,000 concurrent buyers with the projector stopped, so the backlog
// is entries as batch.lua writes them: each holds the events of one call.
// It returns the highest seq of each SKU, the stocked event included.
func fillStreams(b *testing.B, s *stacktest.Stack, n, skus int) (seqs int64) {
	b.Helper()
	ctx := context.Background()
	for k := range skus {
		s.SKU(b, fmt.Sprintf("bench-%d", k), int64(n/skus+1), 1)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 1000 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				sku, user := fmt.Sprintf("bench-%d", i%int64(skus)), fmt.Sprint("u", i)
				if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, user, 1, user)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return int64(n + skus)
}

func totalRows(b *testing.B, s *stacktest.Stack) int {
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// projectedSeqs is the sum of the SKUs' highest projected seqs, read from
// the balances: once it reaches fillStreams' total, the last event of each
// SKU is in. The drain polls it every few milliseconds; a count(*) of the
// growing ledger would keep a PostgreSQL backend busy for most of a core
// and be measured as the projector's cost.
func projectedSeqs(b *testing.B, s *stacktest.Stack) int64 {
	var n int64
	if err := s.Pool.QueryRow(context.Background(), `SELECT COALESCE(sum(last_seq), 0) FROM balances`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// processCPU is the CPU time this process has used: the projector's, in a
// drain, since fillStreams is done before the clock starts.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkProjectorDrain measures how fast the projector drains a backlog of
// b.N purchases: the stream is filled first, by real purchases, then the
// clock runs from the projector's start until the ledger holds every event. It also reports
// the CPU this process (the projector) used per event.
func BenchmarkProjectorDrain(b *testing.B) {
	for _, skus := range []int{1, 256} {
		b.Run(fmt.Sprintf("skus=%d", skus), func(b *testing.B) {
			s := stacktest.New(b)
			seqs := fillStreams(b, s, b.N, skus)
			b.ResetTimer()
			start, cpu := time.Now(), processCPU(b)
			s.RunProjector(b)
			deadline := start.Add(10 * time.Minute)
			for projectedSeqs(b, s) < seqs {
				if time.Now().After(deadline) {
					b.Fatalf("projected seqs summing to %d of %d in 10 minutes", projectedSeqs(b, s), seqs)
				}
				time.Sleep(5 * time.Millisecond)
			}
			took, cpu := time.Since(start), processCPU(b)-cpu
			b.StopTimer()
			if n := totalRows(b, s); int64(n) != seqs {
				b.Fatalf("the ledger holds %d rows for %d events", n, seqs)
			}
			b.ReportMetric(float64(b.N)/took.Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/event")
		})
	}
}

// BenchmarkRawBatchedInsert is the ceiling the projector is compared with:
// the same ledger insert, 500 rows a transaction, from two writers, with no
// Redis in the way.
func BenchmarkRawBatchedInsert(b *testing.B) {
	s := stacktest.New(b)
	events := make([]domain.Event, b.N)
	for i := range events {
		events[i] = domain.Event{ID: uuid.Must(uuid.NewV7()).String(), Type: domain.EventDeducted, SKU: fmt.Sprintf("raw-%d", i%256),
			Seq: int64(i/256 + 1), Qty: 1, Delta: -1, Balance: 1, User: "u", RequestID: fmt.Sprint("r", i),
			OccurredAt: time.Now(), StreamID: fmt.Sprintf("%d-0", i+1)}
	}
	const batch, writers = 500, 2
	work := make(chan []domain.Event)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for chunk := range work {
				if _, err := s.Projection.AppendBatch(context.Background(), chunk); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := 0; i < len(events); i += batch {
		work <- events[i:min(i+batch, len(events))]
	}
	close(work)
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
