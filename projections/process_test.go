package projections_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections"
)

// The environment of a projector child process: TestMain runs
// projectorChild instead of the tests when childStreamsEnv is set.
const (
	childStreamsEnv  = "PROJECTIONS_CHILD_STREAMS" // comma-separated
	childRedisEnv    = "PROJECTIONS_CHILD_REDIS"
	childDatabaseEnv = "PROJECTIONS_CHILD_DATABASE_URL"
	childConsumerEnv = "PROJECTIONS_CHILD_CONSUMER"
	// childHoldEnv makes the child stop for good in its first transaction
	// of at least childHoldMinEnv events: "after-commit" (committed, not yet
	// acked) or "before-commit" (delivered, not committed), after saying so
	// on stdout; the parent then kills it with SIGKILL.
	childHoldEnv    = "PROJECTIONS_CHILD_HOLD"
	childHoldMinEnv = "PROJECTIONS_CHILD_HOLD_MIN"
)

// projectorChild runs a projector over the servers its environment names,
// as a separate process would, until SIGTERM. It prints READY once running
// and, with childHoldEnv, COMMITTED n when it stops after committing n
// events or HOLDING n when it stops before committing the events of n
// stream entries.
func projectorChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(childDatabaseEnv))
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer pool.Close()
	var minHold int
	fmt.Sscan(os.Getenv(childHoldMinEnv), &minHold)
	store := &holdingStore{ProjectorStore: stacktest.ProjectionStore(pool), mode: os.Getenv(childHoldEnv), min: minHold}
	p, err := projections.NewProjector(projections.ProjectorConfig{
		NewRedisClient: func(poolSize int) redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: os.Getenv(childRedisEnv), PoolSize: poolSize})
		},
		Streams:      strings.Split(os.Getenv(childStreamsEnv), ","),
		ConsumerName: os.Getenv(childConsumerEnv),
		// A whole read in one transaction even when the machine is so busy
		// that the read's messages take longer than the default ReadWait to
		// pass the router: the test holds the first batch of a full read.
		Commit: projections.GroupCommitConfig{ReadWait: 20 * time.Second},
		// Long enough that the victim still holds its entries when the test
		// looks, short enough that the survivor takes them soon after.
		ReclaimAfter:  3 * time.Second,
		ClaimInterval: 200 * time.Millisecond,
		Logger:        quiet,
		Metrics:       projections.NewMetrics(prometheus.NewRegistry()),
	}, store, store)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("READY")
	if err := p.Run(ctx); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	return 0
}

// holdingStore is the ledger, except that the first batch of at least min
// events, with mode set, never returns: before or after its commit, as
// mode says.
type holdingStore struct {
	stacktest.ProjectorStore
	mode string
	min  int
	once sync.Once
}

func (h *holdingStore) AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error) {
	hold := h.mode != "" && len(events) >= h.min
	if hold && h.mode == "before-commit" {
		h.once.Do(func() { fmt.Println("HOLDING", entriesOf(events)) })
		select {}
	}
	inserted, err := h.ProjectorStore.AppendBatch(ctx, events)
	if hold && err == nil {
		h.once.Do(func() { fmt.Println("COMMITTED", len(events)) })
		select {}
	}
	return inserted, err
}

// entriesOf counts the stream entries events came from: a purchase batch
// appends several events in one entry.
func entriesOf(events []domain.Event) int {
	ids := map[string]bool{}
	for _, e := range events {
		ids[e.StreamID] = true
	}
	return len(ids)
}

// projectorProcess is a projector child process.
type projectorProcess struct {
	cmd   *exec.Cmd
	lines chan string
}

// startProjectorProcess starts this test binary as a projector process over
// s's servers, with consumer name prefix name and hold mode hold (see
// childHoldEnv), and waits until it runs. The test's end kills it.
func startProjectorProcess(t *testing.T, s *stacktest.Stack, name, hold string, holdMin int) *projectorProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childStreamsEnv+"="+strings.Join(s.Keyspace.StreamKeys(), ","),
		childRedisEnv+"="+s.Redis.Addr(),
		childDatabaseEnv+"="+s.DatabaseURL,
		childConsumerEnv+"="+name,
		childHoldEnv+"="+hold,
		fmt.Sprintf("%s=%d", childHoldMinEnv, holdMin))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &projectorProcess{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { p.kill(t) })
	p.expect(t, "READY", 30*time.Second)
	return p
}

// expect waits up to timeout for a line of the process starting with
// prefix, and returns it.
func (p *projectorProcess) expect(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("projector process ended before saying %s", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			if strings.HasPrefix(line, "ERR") {
				t.Fatalf("projector process: %s", line)
			}
		case <-deadline:
			t.Fatalf("projector process did not say %s within %s", prefix, timeout)
		}
	}
}

// kill ends the process with SIGKILL: no deferred call, no graceful stop.
func (p *projectorProcess) kill(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("kill -9 projector process: %v", err)
	}
	_ = p.cmd.Wait()
}

// pendingOf counts the group's pending entries of sku's stream held by
// consumer ("" for every consumer).
func pendingOf(t *testing.T, s *stacktest.Stack, sku, consumer string) int64 {
	t.Helper()
	ctx := context.Background()
	stream := s.Keyspace.SKUStreamKey(sku)
	if consumer == "" {
		p, err := s.RedisClient.XPending(ctx, stream, projections.ConsumerGroup).Result()
		if err != nil {
			t.Fatal(err)
		}
		return p.Count
	}
	p, err := s.RedisClient.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: stream, Group: projections.ConsumerGroup,
		Consumer: consumer, Start: "-", End: "+", Count: 100_000}).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(p))
}

// TestProjectorProcessKilledBetweenCommitAndAck kills a projector process
// with SIGKILL after it committed a 500-event read and before it acked it.
// The restarted process (same consumer name) takes the 500 entries back,
// and the ledger holds each event exactly once.
func TestProjectorProcessKilledBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "kill-commit-ack"
	s.SKU(t, sku, 1000, 1) // the stocked event, then 499 purchases: 500 entries
	for i := range 499 {
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, fmt.Sprint("u", i), 1, fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamLen(t, s, sku); n != 500 {
		t.Fatalf("stream holds %d events, want 500", n)
	}
	p := startProjectorProcess(t, s, "crashy", "after-commit", 500)
	if line := p.expect(t, "COMMITTED", 60*time.Second); line != "COMMITTED 500" {
		t.Fatalf("projector process said %q, want one transaction of the read's 500 events", line)
	}
	if n, pending := ledgerCount(t, s.Pool, sku), pendingOf(t, s, sku, "crashy-0"); n != 500 || pending != 500 {
		t.Fatalf("between commit and ack: ledger %d rows, %d entries pending on crashy-0; want 500 and 500", n, pending)
	}
	p.kill(t)

	startProjectorProcess(t, s, "crashy", "", 0)
	localstacktest.WaitFor(t, "the restarted process to take back and ack its 500 entries", 30*time.Second,
		func() bool { return pendingOf(t, s, sku, "") == 0 })
	assertLedgerEqualsStream(t, s, sku)
}

// TestTwoProjectorProcessesOneKilledMidSale runs two projector processes in
// one consumer group during a sale and kills one with SIGKILL while it
// holds a read it has not committed: the survivor claims the dead one's
// pending entries (XAUTOCLAIM after ReclaimAfter) and the ledger equals
// Redis.
func TestTwoProjectorProcessesOneKilledMidSale(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	const sku = "two-processes"
	s.SKU(t, sku, 3000, 1)
	victim := startProjectorProcess(t, s, "victim", "before-commit", 1)
	saleDone := saleInBackground(t, s, sku, 2500, 2500)
	var held int64
	fmt.Sscanf(victim.expect(t, "HOLDING", 60*time.Second), "HOLDING %d", &held)
	// Checked before the survivor starts: on a loaded machine the held read
	// can be older than ReclaimAfter by now, and the survivor would already
	// be claiming it.
	if pending := pendingOf(t, s, sku, "victim-0"); pending < held {
		t.Fatalf("the victim holds %d pending entries, want at least the %d whose events it is committing", pending, held)
	}
	startProjectorProcess(t, s, "survivor", "", 0)
	victim.kill(t)
	<-saleDone
	want := streamLen(t, s, sku)
	localstacktest.WaitFor(t, "the survivor to claim the dead process's entries and catch up", 60*time.Second,
		func() bool { return ledgerCount(t, s.Pool, sku) == want && pendingOf(t, s, sku, "") == 0 })
	if pending := pendingOf(t, s, sku, "victim-0"); pending != 0 {
		t.Fatalf("%d entries still pending on the dead process", pending)
	}
	assertLedgerEqualsStream(t, s, sku)
}
