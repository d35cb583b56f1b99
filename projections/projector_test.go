package projections_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections"
)

func TestMain(m *testing.M) {
	if os.Getenv(childStreamsEnv) != "" {
		os.Exit(projectorChild())
	}
	localstacktest.Main(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// streamLen counts the SKU's events in its partition stream.
func streamLen(t *testing.T, s *stacktest.Stack, sku string) int { return len(s.StreamEvents(t, sku)) }

func ledgerCount(t *testing.T, pool *pgxpool.Pool, sku string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_entries WHERE sku = $1`, sku).Scan(&n); err != nil {
		t.Logf("count ledger: %v", err)
		return -1
	}
	return n
}

// assertLedgerEqualsStream checks the projection invariants for sku: one row
// per stream event, seqs 1..N without gaps, and SUM(delta) equal to both the
// Redis stock and the balances row.
func assertLedgerEqualsStream(t *testing.T, s *stacktest.Stack, sku string) {
	t.Helper()
	ctx := context.Background()
	var entries []map[string]any
	for _, e := range s.StreamEvents(t, sku) {
		// Entries without an event id are dead letters; tests check them apart.
		if _, ok := e["event_id"]; ok {
			entries = append(entries, e)
		}
	}
	want := map[string]string{}
	for _, e := range entries {
		want[e["event_id"].(string)] = e["seq"].(string)
	}
	rows, err := s.Pool.Query(ctx, `SELECT event_id::text, seq FROM ledger_entries WHERE sku = $1 ORDER BY seq`, sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id string
		var seq int64
		if err := rows.Scan(&id, &seq); err != nil {
			t.Fatal(err)
		}
		n++
		if seq != int64(n) {
			t.Fatalf("ledger seq %d at position %d: gap or duplicate", seq, n)
		}
		if want[id] != fmt.Sprint(seq) {
			t.Fatalf("ledger row %s seq %d not in the stream with that seq", id, seq)
		}
	}
	if n != len(entries) {
		t.Fatalf("ledger has %d rows, stream has %d events", n, len(entries))
	}
	var sum, balance, lastSeq int64
	if err := s.Pool.QueryRow(ctx, `SELECT COALESCE(SUM(delta),0) FROM ledger_entries WHERE sku = $1`, sku).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT balance, last_seq FROM balances WHERE sku = $1`, sku).Scan(&balance, &lastSeq); err != nil {
		t.Fatal(err)
	}
	st, err := s.Service.State(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if sum != *st.RedisStock || balance != sum || lastSeq != int64(n) {
		t.Fatalf("SUM(delta)=%d redis stock=%d balances=%d/%d, want all equal and last_seq %d", sum, *st.RedisStock, balance, lastSeq, n)
	}
}

// sale fires users purchases (retries and repeat buyers included) at sku and
// releases every tenth success.
func sale(t *testing.T, s *stacktest.Stack, sku string, users, goroutines int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, goroutines)
	for i := range goroutines {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u := i % users
			cmd := ledger.MustDeductCommand(sku, fmt.Sprintf("u%d", u), 1, fmt.Sprintf("r%d-%d", u, i%3))
			rc, err := s.Service.Deduct(ctx, cmd)
			switch {
			case err == nil && rc.Seq%10 == 0:
				if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, cmd.User.String(), cmd.RequestID.String(), "")); err != nil {
					t.Errorf("release: %v", err)
				}
			case err == nil, errors.Is(err, domain.ErrSoldOut), errors.Is(err, domain.ErrAlreadyPurchased):
			default:
				t.Errorf("deduct: %v", err)
			}
		})
	}
	wg.Wait()
}

// saleInBackground runs sale in a goroutine and returns a channel closed
// when it ends. A test that fails before then still waits for the sale
// before its stack's cleanup closes the clients, so the failure is not
// buried under thousands of "client is closed" errors.
func saleInBackground(t *testing.T, s *stacktest.Stack, sku string, users, goroutines int) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); sale(t, s, sku, users, goroutines) }()
	t.Cleanup(func() { <-done })
	return done
}

func TestProjectionOfAFlashSaleWithReleases(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "proj-sku", 500, 1)
	s.SKU(t, "proj-other", 50, 1) // another SKU, likely in another partition
	s.RunProjector(t)
	sale(t, s, "proj-sku", 2000, 5000)
	sale(t, s, "proj-other", 100, 200)
	for _, sku := range []string{"proj-sku", "proj-other"} {
		want := streamLen(t, s, sku)
		localstacktest.WaitFor(t, "ledger to catch up with "+sku, 60*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) == want })
		assertLedgerEqualsStream(t, s, sku)
	}
}

// flakyStore loses its connection mid-batch: from the moment armed is set it
// fails every batch without committing, like a process that died mid-commit.
type flakyStore struct {
	stacktest.ProjectorStore
	armed   atomic.Bool
	refused atomic.Int64
}

func (f *flakyStore) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	if f.armed.Load() {
		f.refused.Add(int64(len(events)))
		return nil, errors.New("connection lost mid-batch")
	}
	return f.ProjectorStore.AppendBatch(ctx, events)
}

func TestProjectorCrashMidBatchLosesNothing(t *testing.T) {
	s := stacktest.New(t)
	const sku = "crash-sku"
	s.SKU(t, sku, 3000, 1)
	flaky := &flakyStore{ProjectorStore: s.Projection}
	stop := s.RunProjector(t, stacktest.ProjectorName("crashy"), stacktest.ProjectorStoreOf(flaky))

	saleDone := saleInBackground(t, s, sku, 4000, 4000)
	localstacktest.WaitFor(t, "some projection", 30*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) > 200 })
	// Crash: batches in flight fail and nothing more commits; the process is
	// gone before any retry can succeed, leaving its entries pending.
	flaky.armed.Store(true)
	localstacktest.WaitFor(t, "a batch to fail mid-flight", 10*time.Second, func() bool { return flaky.refused.Load() > 0 })
	stop()
	pending, err := s.RedisClient.XPending(context.Background(), s.Keyspace.SKUStreamKey(sku), projections.ConsumerGroup).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pending.Count == 0 {
		t.Fatal("the crash left no pending entries; the test did not crash mid-batch")
	}
	// Restart under the same stable name while the sale goes on.
	s.RunProjector(t, stacktest.ProjectorName("crashy"))
	<-saleDone
	want := streamLen(t, s, sku)
	localstacktest.WaitFor(t, "ledger to catch up after the restart", 60*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) == want })
	assertLedgerEqualsStream(t, s, sku)
}

func TestMalformedEntryGoesToDeadLettersAndProjectionContinues(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "dl-sku"
	s.SKU(t, sku, 10, 1)
	stream := s.Keyspace.SKUStreamKey(sku)
	badID, err := s.RedisClient.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"e": "not-an-id deducted " + sku + " x 1 9"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, fmt.Sprint(i), 1, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.RunProjector(t)
	localstacktest.WaitFor(t, "the entries after the bad one", 30*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) == 6 })
	var gotStream, gotID, reason string
	var fields map[string]string
	localstacktest.WaitFor(t, "the dead letter", 10*time.Second, func() bool {
		return s.Pool.QueryRow(ctx, `SELECT stream, stream_id, error, fields FROM dead_letters`).Scan(&gotStream, &gotID, &reason, &fields) == nil
	})
	if gotStream != stream || gotID != badID || fields["e"] == "" {
		t.Fatalf("dead letter %s %s %v, want %s %s with its raw fields", gotStream, gotID, fields, stream, badID)
	}
	for _, f := range []string{"event_id", "seq"} {
		if !strings.Contains(reason, f) {
			t.Fatalf("dead letter reason %q does not name bad field %s", reason, f)
		}
	}
	// Entries are acked after their commit, asynchronously: wait for it.
	localstacktest.WaitFor(t, "no entry left pending after dead-lettering", 10*time.Second, func() bool {
		pending, err := s.RedisClient.XPending(ctx, stream, projections.ConsumerGroup).Result()
		return err == nil && pending.Count == 0
	})
	assertLedgerEqualsStream(t, s, sku)
}
