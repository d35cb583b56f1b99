package projections_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

// fillStreams appends n well-formed deducted events spread over skus SKUs,
// in the stream format the purchase script writes (entry.lua), with
// pipelined XADDs.
func fillStreams(b *testing.B, s *stacktest.Stack, n, skus int) {
	b.Helper()
	ctx := context.Background()
	seq := make([]int64, skus)
	pipe := s.RedisClient.Pipeline()
	for i := range n {
		k := i % skus
		seq[k]++
		sku := fmt.Sprintf("bench-%d", k)
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: s.Keyspace.SKUStreamKey(sku), Values: []any{
			"e", fmt.Sprintf("%s deducted %s %d 1 %d", uuid.Must(uuid.NewV7()), sku, seq[k], 1_000_000-seq[k]),
			"user", fmt.Sprint("u", i), "request_id", fmt.Sprint("r", i),
		}})
		if pipe.Len() == 1000 || i == n-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func totalRows(b *testing.B, s *stacktest.Stack) int {
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// projectedEvents is how many of fillStreams' events the ledger holds,
// read from the balances: each moved its SKU's balance by -1. The drain
// polls it every few milliseconds; a count(*) of the growing ledger would
// keep a PostgreSQL backend busy for most of a core and be measured as
// the projector's cost.
func projectedEvents(b *testing.B, s *stacktest.Stack) int {
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT COALESCE(-sum(balance), 0) FROM balances`).Scan(&n); err != nil {
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
// b.N events: the stream is filled first, then the clock runs from the
// projector's start until the ledger holds every event. It also reports
// the CPU this process (the projector) used per event.
func BenchmarkProjectorDrain(b *testing.B) {
	for _, skus := range []int{1, 256} {
		b.Run(fmt.Sprintf("skus=%d", skus), func(b *testing.B) {
			s := stacktest.New(b)
			fillStreams(b, s, b.N, skus)
			b.ResetTimer()
			start, cpu := time.Now(), processCPU(b)
			s.RunProjector(b)
			deadline := start.Add(10 * time.Minute)
			for projectedEvents(b, s) < b.N {
				if time.Now().After(deadline) {
					b.Fatalf("projected %d of %d events in 10 minutes", projectedEvents(b, s), b.N)
				}
				time.Sleep(5 * time.Millisecond)
			}
			took, cpu := time.Since(start), processCPU(b)-cpu
			b.StopTimer()
			if n := totalRows(b, s); n != b.N {
				b.Fatalf("the ledger holds %d rows for %d events", n, b.N)
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
