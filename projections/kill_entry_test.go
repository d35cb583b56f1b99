package projections_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// streamEntry is one entry of a partition stream: its id and the ids of
// its events, in order.
type streamEntry struct {
	id     string
	events []domain.Event
}

// streamEntries decodes every entry of the partition stream of sku with the
// projector's own decoder.
func streamEntries(t *testing.T, s *stacktest.Stack, sku string) []streamEntry {
	t.Helper()
	msgs, err := s.RedisClient.XRange(context.Background(), s.Keyspace.SKUStreamKey(sku), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]streamEntry, len(msgs))
	for i, m := range msgs {
		events, err := streamentry.ParseEvents(streamentry.MessageFields(m))
		if err != nil {
			t.Fatalf("entry %s: %v", m.ID, err)
		}
		out[i] = streamEntry{id: m.ID, events: events}
	}
	return out
}

// ledgerEventIDs is the set of event ids of skus in the ledger, read in one
// statement, so one snapshot: what a reader of the ledger could see at
// one instant.
func ledgerEventIDs(t *testing.T, s *stacktest.Stack, skus []string) map[string]bool {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT event_id::text FROM ledger_entries WHERE sku = ANY($1)`, skus)
	if err != nil {
		t.Error(err)
		return nil
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Error(err)
		return nil
	}
	in := make(map[string]bool, len(ids))
	for _, id := range ids {
		in[id] = true
	}
	return in
}

// tornEntries names the entries of which the ledger snapshot in holds some
// events but not all.
func tornEntries(entries []streamEntry, in map[string]bool) []string {
	var torn []string
	for _, e := range entries {
		n := 0
		for _, ev := range e.events {
			if in[ev.ID] {
				n++
			}
		}
		if n != 0 && n != len(e.events) {
			torn = append(torn, fmt.Sprintf("%s (%d of %d events)", e.id, n, len(e.events)))
		}
	}
	return torn
}

// TestProjectorProcessKilledInTheMiddleOfABatchEntry builds a backlog of
// entries of many events by a concurrent sale of two SKUs of one partition
// with no projector running, and kills a projector process with SIGKILL
// while its insert of the biggest entry is half done: an uncommitted row
// holding one event id of that entry, in the middle of it, makes the
// insert wait there, after it wrote the entry's earlier events. PostgreSQL
// notices the dead client (client_connection_check_interval) and rolls that
// transaction back. The restarted process (same consumer name) takes its
// pending entries back. Checked: at the kill, after the rollback and in
// every snapshot of the ledger sampled while the restarted process drains,
// each entry is in the ledger whole or not at all; at the end every event
// of the stream is there exactly once (by event id and by (sku, seq)), the
// seqs of each SKU have no gap, and the sealer links every row.
//
// The projector promises no order across entries (a read's entries are
// handed to the group-commit writer concurrently, which commits them in up
// to Writers transactions at once; docs/guarantees.md: projection is
// independent of arrival order, and the sealer waits for a gap to fill), so
// the test does not check one; what it checks of "no event of a later entry
// before it" is that no entry is ever half in the ledger and that the
// seqs close up without a gap once the backlog is drained.
func TestProjectorProcessKilledInTheMiddleOfABatchEntry(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	a := "kill-entry-a"
	b := skuBeside(s, a, "kill-entry-b")
	skus := []string{a, b}
	const buyers = 1200
	for _, sku := range skus {
		s.SKU(t, sku, buyers/2, 1)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 300)
	for i := range buyers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cmd := ledger.MustDeductCommand(skus[i%2], fmt.Sprint("u", i), 1, fmt.Sprint("r", i))
			if _, err := s.Service.Deduct(ctx, cmd); err != nil {
				t.Errorf("deduct %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	entries := streamEntries(t, s, a)
	var total int
	biggest := entries[0]
	for _, e := range entries {
		total += len(e.events)
		if len(e.events) > len(biggest.events) {
			biggest = e
		}
	}
	// Two stocked events, then one deducted per buyer.
	if total != buyers+2 {
		t.Fatalf("the stream holds %d events, want %d", total, buyers+2)
	}
	if len(biggest.events) < 4 {
		t.Fatalf("the biggest of %d entries holds %d events: the sale wrote no batch entries to test", len(entries), len(biggest.events))
	}
	t.Logf("%d events in %d entries, the biggest of %d", total, len(entries), len(biggest.events))

	// The dead projector's connection is noticed while its insert waits.
	if _, err := s.Pool.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s SET client_connection_check_interval = '50ms'`,
		pgx.Identifier{databaseName(t, s)}.Sanitize())); err != nil {
		t.Fatal(err)
	}
	blocker, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	mid := biggest.events[len(biggest.events)/2]
	if _, err := blocker.Exec(ctx, `INSERT INTO ledger_entries (event_id, sku, seq, type, delta, qty, balance_after, occurred_at, stream_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), 'blocker')`,
		mid.ID, mid.SKU, mid.Seq, string(mid.Type), mid.Delta, mid.Qty, mid.Balance); err != nil {
		t.Fatal(err)
	}
	var blockerPID int
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	waiting := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, blockerPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	p := startProjectorProcess(t, s, "killed-mid-entry", "", 0)
	// The other committer commits batches of the read without the biggest
	// entry meanwhile: the kill lands with some of the backlog committed.
	localstacktest.WaitFor(t, "the projector's insert of the biggest entry to wait in its middle, and another batch to commit", 60*time.Second,
		func() bool { return waiting() > 0 && ledgerCount(t, s.Pool, a)+ledgerCount(t, s.Pool, b) > 0 })
	p.kill(t)
	localstacktest.WaitFor(t, "PostgreSQL to roll back the dead projector's insert", 30*time.Second,
		func() bool { return waiting() == 0 })
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	atKill := ledgerEventIDs(t, s, skus)
	if torn := tornEntries(entries, atKill); len(torn) > 0 {
		t.Fatalf("after the kill, entries half in the ledger: %v", torn)
	}
	for _, ev := range biggest.events {
		if atKill[ev.ID] {
			t.Fatalf("after the kill, event %s of the entry whose insert was killed is in the ledger", ev.ID)
		}
	}
	if len(atKill) == 0 || len(atKill) >= total {
		t.Fatalf("after the kill the ledger holds %d of %d events, want some but not all", len(atKill), total)
	}
	t.Logf("the kill left %d of %d events in the ledger", len(atKill), total)

	// Sample the ledger while the restarted process drains the backlog.
	stop := make(chan struct{})
	samples := make(chan map[string]bool, 1024)
	var sampler sync.WaitGroup
	sampler.Go(func() {
		defer close(samples)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if in := ledgerEventIDs(t, s, skus); in != nil {
				samples <- in
			}
			if len(samples) == cap(samples) {
				return
			}
		}
	})
	startProjectorProcess(t, s, "killed-mid-entry", "", 0)
	localstacktest.WaitFor(t, "the restarted process to drain the backlog", 60*time.Second,
		func() bool { return ledgerCount(t, s.Pool, a)+ledgerCount(t, s.Pool, b) == total })
	close(stop)
	sampler.Wait()
	n := 0
	for in := range samples {
		n++
		if torn := tornEntries(entries, in); len(torn) > 0 {
			t.Errorf("a snapshot of %d events holds entries half: %v", len(in), torn)
		}
	}
	t.Logf("%d snapshots of the ledger during the drain", n)

	var rows, ids, seqs int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id), count(DISTINCT (sku, seq))
		FROM ledger_entries WHERE sku = ANY($1)`, skus).Scan(&rows, &ids, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != total || ids != total || seqs != total {
		t.Fatalf("ledger: %d rows, %d event ids, %d (sku, seq); want %d each", rows, ids, seqs, total)
	}
	final := ledgerEventIDs(t, s, skus)
	for _, e := range entries {
		for _, ev := range e.events {
			if !final[ev.ID] {
				t.Fatalf("event %s of entry %s is not in the ledger", ev.ID, e.id)
			}
		}
	}
	for _, sku := range skus {
		assertLedgerEqualsStream(t, s, sku)
	}
	s.Seal(t)
	var sealed []int64
	if err := s.Pool.QueryRow(ctx, `SELECT array_agg(n ORDER BY sku) FROM (SELECT sku, count(*) n FROM ledger_seals
		WHERE sku = ANY($1) GROUP BY sku) c`, skus).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if want := []int64{buyers/2 + 1, buyers/2 + 1}; !slices.Equal(sealed, want) {
		t.Fatalf("sealed rows per SKU %v, want %v: a gap stops the seal", sealed, want)
	}
}

// databaseName is the name of the stack's database.
func databaseName(t *testing.T, s *stacktest.Stack) string {
	t.Helper()
	var name string
	if err := s.Pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}
