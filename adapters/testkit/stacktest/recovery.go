package stacktest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/seal"
	"github.com/invledger/invledger/projections"
	"github.com/invledger/invledger/projections/streamentry"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Recovery is the application's ledger.Recovery.
func (s *Stack) Recovery(testing.TB) *ledger.Recovery { return s.App.Recovery }

// Archiver is the application's ledger.Archiver.
func (s *Stack) Archiver(testing.TB) *ledger.Archiver { return s.App.Archiver }

// ProjectStreams appends every event now in the partition streams to the
// ledger, as the projector would, without running one, and seals the
// ledger as serve's sealer would: for tests that need the ledger to equal
// Redis at a known moment.
func (s *Stack) ProjectStreams(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for _, stream := range s.Keyspace.StreamKeys() {
		msgs, err := s.RedisClient.XRange(ctx, stream, "-", "+").Result()
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		events := make([]domain.Event, 0, len(msgs))
		for _, m := range msgs {
			entry, err := streamentry.ParseEvents(streamentry.MessageFields(m))
			if err != nil {
				t.Fatalf("stream entry %s %s: %v", stream, m.ID, err)
			}
			events = append(events, entry...)
		}
		for len(events) > 0 {
			n := min(len(events), 1000)
			if _, err := s.Projection.AppendBatch(ctx, events[:n]); err != nil {
				t.Fatalf("append to the ledger: %v", err)
			}
			events = events[n:]
		}
	}
	s.Seal(t)
}

// Seal runs one pass of the application's sealer.
func (s *Stack) Seal(t testing.TB) seal.Pass {
	t.Helper()
	pass, err := s.App.Sealer.SealAll(context.Background())
	if err != nil {
		t.Fatalf("seal the ledger: %v", err)
	}
	return pass
}

// ProjectorStore is where a test projector writes: the stack's projection
// store, or a wrapper of it that injects faults.
type ProjectorStore interface {
	projections.LedgerAppender
	projections.DeadLetterStore
}

var _ ProjectorStore = (*pgstore.PostgresProjectionStore)(nil)

// ProjectorOption changes how RunProjector configures the projector.
type ProjectorOption func(*projections.ProjectorConfig, *ProjectorStore)

// ProjectorName sets the stable consumer-name prefix (default "stacktest").
func ProjectorName(name string) ProjectorOption {
	return func(c *projections.ProjectorConfig, _ *ProjectorStore) { c.ConsumerName = name }
}

// ProjectorStoreOf makes the projector write to store instead of the ledger.
func ProjectorStoreOf(store ProjectorStore) ProjectorOption {
	return func(_ *projections.ProjectorConfig, s *ProjectorStore) { *s = store }
}

// RunProjector starts a projector over every partition stream, with the
// restart-loss guard serve uses, and returns a function that stops it and
// waits for it; the test's end stops it too.
func (s *Stack) RunProjector(t testing.TB, opts ...ProjectorOption) (stop func()) {
	t.Helper()
	cfg := projections.ProjectorConfig{
		NewRedisClient: func(poolSize int) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: s.Redis.Addr(), PoolSize: poolSize})
		},
		Streams:              s.Keyspace.StreamKeys(),
		ConsumerName:         "stacktest",
		RetryInitialInterval: 50 * time.Millisecond,
		RetryMaxInterval:     500 * time.Millisecond,
		NodeRuns:             s.NodeRuns.NodeRuns,
		EntryExists:          s.NodeRuns.EntryExists,
		Logger:               quiet,
		Metrics:              projections.NewMetrics(prometheus.NewRegistry()),
	}
	var store ProjectorStore = s.Projection
	for _, o := range opts {
		o(&cfg, &store)
	}
	p, err := projections.NewProjector(cfg, store, store)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("projector: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("projector did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// WaitProjected waits until the ledger holds as many events of sku as its
// partition stream, failing the test when the ledger's count has not
// grown for stall (a stuck projector) or after a few minutes (one that
// moves without arriving): how long catching up takes depends on the
// machine's load, not on the code under test.
func (s *Stack) WaitProjected(t testing.TB, sku string, stall time.Duration) {
	t.Helper()
	want := int64(len(s.StreamEvents(t, sku)))
	localstacktest.WaitProgress(t, fmt.Sprintf("the ledger to hold the stream's %d events of %s", want, sku), stall, max(3*time.Minute, 3*stall),
		func() (bool, int64) {
			var n int64
			if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries WHERE sku = $1`, sku).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == want, n
		})
}
