package natsexport_test

import (
	"fmt"
	"testing"

	"github.com/invledger/invledger/adapters/internal/brokerexport/exporttest"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// BenchmarkExportBacklogToJetStream exports a ledger backlog of b.N events
// over 1, 64 or 1,000 SKUs, written straight into PostgreSQL, to a private
// JetStream, from the first poll to the last cursor write, and reports
// events/s: on Debian's nats-server 2.9.10 and on the current one go.mod
// requires, each on the path its single-replica stream takes (the
// pipeline), and on the paths of a replicated stream, chosen with
// Config.Path (atomic batches on the current server, per SKU on 2.9.10).
// The targets, on a quiet 2-core machine with the broker, PostgreSQL and
// the exporter on it: at least 50,000 events/s on the current server with
// 200,000 events over 1,000 SKUs (-benchtime 200000x), and no slower than
// before on 2.9.10. Runs of fewer than 1,000 events (make test's short
// run) only build the fixture's code and report 0.
func BenchmarkExportBacklogToJetStream(b *testing.B) {
	for _, server := range []struct {
		name, path string
		cfg        brokertest.NATSConfig
	}{
		{"2.9.10", "", brokertest.NATSConfig{}},
		{"2.9.10-per_sku", "per_sku", brokertest.NATSConfig{}},
		{"current", "", brokertest.NATSConfig{Current: true}},
		{"current-atomic_batch", "atomic_batch", brokertest.NATSConfig{Current: true}},
	} {
		for _, skus := range []int{1, 64, 1000} {
			b.Run(fmt.Sprintf("server=%s/skus=%d", server.name, skus), func(b *testing.B) { benchDrain(b, server.cfg, server.path, skus) })
		}
	}
}

func benchDrain(b *testing.B, cfg brokertest.NATSConfig, path string, skus int) {
	if b.N < exporttest.MinBacklog {
		b.ReportMetric(0, "events/s")
		return
	}
	localstacktest.SkipShort(b)
	st := stacktest.New(b)
	n := brokertest.StartNATS(b, cfg)
	exporttest.WriteBacklog(b, st.Pool, b.N, skus)
	pub, err := natsexport.New(natsexport.Config{URL: n.URL(), Path: path, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	rate, took := exporttest.Drain(b, st.Pool, pub, b.N)
	if got := brokertest.StreamCount(n.URL(), natsexport.DefaultStream); got != b.N {
		b.Fatalf("the stream holds %d messages for %d events", got, b.N)
	}
	b.ReportMetric(rate, "events/s")
	b.Logf("path %s", took)
}
