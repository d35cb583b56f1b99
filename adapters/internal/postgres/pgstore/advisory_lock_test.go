package pgstore_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/ledger"
)

// TestLeadershipIsExclusiveAndTakenOver runs a role as leader in three
// "processes" (a pool each) over one database. Exactly one leads at a
// time. Killing the leader's session, as PostgreSQL does when its process
// dies (kill -9), hands the role to another within a poll or two; a leader
// that stops gives the role up at once.
func TestLeadershipIsExclusiveAndTakenOver(t *testing.T) {
	t.Parallel()
	first := newPool(t)
	pools := []*pgxpool.Pool{first}
	for range 2 {
		p, err := pgxpool.NewWithConfig(context.Background(), first.Config().Copy())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pools = append(pools, p)
	}
	const poll, takeoverBound = 100 * time.Millisecond, 3 * time.Second
	var (
		active, maxActive atomic.Int32
		changed           = make(chan int, 16)
	)
	cancels := make([]context.CancelFunc, len(pools))
	var wg sync.WaitGroup
	for i, pool := range pools {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		cfg := ledger.LeaderConfig{Name: "test-role", Lock: pgstore.NewPostgresAdvisoryLock(pool, "test-role"), Poll: poll,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		wg.Go(func() {
			err := ledger.RunAsLeader(ctx, cfg, func(ctx context.Context) error {
				n := active.Add(1)
				if n > maxActive.Load() {
					maxActive.Store(n)
				}
				changed <- i
				<-ctx.Done()
				active.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
		wg.Wait()
	}()
	waitLeader := func(not int) (int, time.Duration) {
		t.Helper()
		start := time.Now()
		for {
			select {
			case i := <-changed:
				if i != not {
					return i, time.Since(start)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no new leader within 5s (leader was %d)", not)
			}
		}
	}
	l, _ := waitLeader(-1)
	time.Sleep(5 * poll) // the others try and fail meanwhile
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d leaders at once", m)
	}

	// The leader's process dies: its session ends.
	var killed bool
	if err := first.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the leader's session: %v %v", killed, err)
	}
	next, took := waitLeader(l)
	t.Logf("leader %d's session killed; %d took over after %v", l, next, took.Round(time.Millisecond))
	// What this guards is a takeover that waits for a session timeout
	// (minutes) instead of the next poll; a bound of many polls says so
	// on a loaded machine too.
	if took > takeoverBound {
		t.Fatalf("takeover took %v, want within a few polls of %v", took, poll)
	}

	// A leader whose session broke while it lives notices within a poll;
	// until then it overlaps its successor (repairs stay serialised by
	// their own lock).
	time.Sleep(3 * poll)
	if n := active.Load(); n != 1 {
		t.Fatalf("%d leaders active a few polls after the takeover", n)
	}
	maxActive.Store(1)

	// A leader that stops releases the role at once.
	cancels[next]()
	third, took := waitLeader(next)
	t.Logf("leader %d stopped; %d took over after %v", next, third, took.Round(time.Millisecond))
	if took > takeoverBound {
		t.Fatalf("takeover after a clean stop took %v, want within a few polls of %v", took, poll)
	}
	time.Sleep(5 * poll)
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d leaders at once", m)
	}
}
