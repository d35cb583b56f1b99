// Package exporttest times the broker export's drain of a ledger backlog,
// the measure behind each publisher's benchmark.
package exporttest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
)

// MinBacklog is the smallest backlog worth timing: below it the timer
// measures the exporter's start, not its rate.
const MinBacklog = 1000

// SKU is the id of the i-th SKU of a backlog WriteBacklog wrote.
func SKU(i int) string { return fmt.Sprintf("bench-%04d", i) }

// WriteBacklog writes events purchases spread evenly over skus SKUs
// straight into the ledger of pool, as a projector that ran ahead of the
// export would leave them.
func WriteBacklog(b testing.TB, pool *pgxpool.Pool, events, skus int) {
	b.Helper()
	ctx := context.Background()
	store := pgstore.NewPostgresProjectionStore(pool)
	seqs := make([]int64, skus)
	batch := make([]domain.Event, 0, 1000)
	at := time.Now()
	for i := range events {
		s := i % skus
		seqs[s]++
		batch = append(batch, domain.Event{ID: uuid.NewString(), SKU: SKU(s), Seq: seqs[s],
			Type: domain.EventDeducted, Qty: 1, Delta: -1, Balance: 1_000_000 - seqs[s], User: fmt.Sprintf("u%d", i),
			RequestID: fmt.Sprintf("r%d", i), OccurredAt: at})
		if len(batch) == cap(batch) || i == events-1 {
			if _, err := store.AppendBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// Drain runs an exporter through pub from the first poll until its
// cursors cover the events of the ledger of pool, timing just that, and
// returns the rate in events/s and the path the publisher took.
func Drain(b *testing.B, pool *pgxpool.Pool, pub brokerexport.Publisher, events int) (rate float64, path string) {
	b.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	exp, err := brokerexport.New(brokerexport.Config{Store: pgstore.NewPostgresExportStore(pool), Publisher: pub,
		Metrics: brokerexport.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	go func() { _ = exp.Run(ctx); close(done) }()
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		var confirmed int
		if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(seq), 0) FROM export_cursors WHERE broker = $1`, pub.Broker()).Scan(&confirmed); err != nil {
			b.Fatal(err)
		}
		if confirmed == events {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the export confirmed %d of %d events in 10 minutes: %v", confirmed, events, exp.Status().Err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	path = pub.Path()
	cancel()
	<-done
	return float64(events) / elapsed.Seconds(), path
}
