package natsexport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

// minBacklog is the smallest backlog worth timing: below it the timer
// measures the exporter's start, not its rate.
const minBacklog = 1000

// BenchmarkExportBacklogToJetStream exports a ledger backlog of b.N events
// over 64 or 1,000 SKUs, written straight into PostgreSQL, to a private
// JetStream, from the first poll to the last cursor write, and reports
// events/s: on Debian's nats-server 2.9.10 (the per-SKU path) and on the
// current one go.mod requires (atomic batches). The targets, on a quiet
// 2-core machine with the broker, PostgreSQL and the exporter on it: at
// least 50,000 events/s on the current server with 200,000 events over
// 1,000 SKUs (-benchtime 200000x), and no slower than before on 2.9.10.
// Runs of fewer than 1,000 events (make test's short run) only build the
// fixture's code and report 0.
func BenchmarkExportBacklogToJetStream(b *testing.B) {
	for _, server := range []struct {
		name string
		cfg  brokertest.NATSConfig
	}{{"2.9.10", brokertest.NATSConfig{}}, {"current", brokertest.NATSConfig{Current: true}}} {
		for _, skus := range []int{64, 1000} {
			b.Run(fmt.Sprintf("server=%s/skus=%d", server.name, skus), func(b *testing.B) { benchDrain(b, server.cfg, skus) })
		}
	}
}

func benchDrain(b *testing.B, cfg brokertest.NATSConfig, skus int) {
	if b.N < minBacklog {
		b.ReportMetric(0, "events/s")
		return
	}
	localstacktest.SkipShort(b)
	st := stacktest.New(b)
	n := brokertest.StartNATS(b, cfg)
	ctx := context.Background()
	store := pgstore.NewPostgresProjectionStore(st.Pool)
	seqs := make([]int64, skus)
	batch := make([]domain.Event, 0, 1000)
	at := time.Now()
	for i := range b.N {
		s := i % skus
		seqs[s]++
		batch = append(batch, domain.Event{ID: uuid.NewString(), SKU: fmt.Sprintf("bench-%04d", s), Seq: seqs[s],
			Type: domain.EventDeducted, Qty: 1, Delta: -1, Balance: 1_000_000 - seqs[s], User: fmt.Sprintf("u%d", i),
			RequestID: fmt.Sprintf("r%d", i), OccurredAt: at})
		if len(batch) == cap(batch) || i == b.N-1 {
			if _, err := store.AppendBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	pub, err := natsexport.New(natsexport.Config{URL: n.URL(), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	exp, err := brokerexport.New(brokerexport.Config{Store: pgstore.NewPostgresExportStore(st.Pool), Publisher: pub,
		Metrics: brokerexport.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	go func() { _ = exp.Run(runCtx); close(done) }()
	for {
		var confirmed int
		if err := st.Pool.QueryRow(ctx, `SELECT COALESCE(sum(seq), 0) FROM export_cursors WHERE broker = 'nats'`).Scan(&confirmed); err != nil {
			b.Fatal(err)
		}
		if confirmed == b.N {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	path := pub.Path()
	cancel()
	<-done
	if got := brokertest.StreamCount(n.URL(), natsexport.DefaultStream); got != b.N {
		b.Fatalf("the stream holds %d messages for %d events", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.Logf("path %s", path)
}
