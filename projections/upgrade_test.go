package projections_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// TestSwitchFromPerEventToPerCallMidSale is the last step of a rolling
// upgrade from 1.0.0: a deployment selling with --stream-entries per-event
// (while 1.0.0 processes still read the streams) is switched to per-call
// one process at a time, in the middle of a sale, so for a while one
// process writes 1.0.0's entries and another entries of several events,
// into the same stream. With the projector stopped through all of it, the
// backlog of both kinds is then projected: every event lands in the ledger
// exactly once and the ledger equals Redis, nothing is dead-lettered. Every
// entry of the per-event process is one 1.0.0's decoder reads: one event,
// 1.0.0's deduct.lua's fields only, e of six space-separated values, no
// "\n" in any field.
func TestSwitchFromPerEventToPerCallMidSale(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.StreamEntries = streamentry.EntriesPerEvent }))
	ctx := context.Background()
	const sku, buyers = "switch-entries", 900
	s.SKU(t, sku, buyers, 1)
	// The same deployment's other process, restarted with the default.
	perCall, err := app.New(ctx, app.Config{DatabaseURL: s.DatabaseURL, RedisURL: s.Redis.URL(), Durability: app.DurabilityStrict,
		RedisPoolSize: 256, RedisTimeout: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(perCall.Close)

	// sell has buyers from to to-1 buy one unit each through svc, request
	// ids prefixed by the mode, all at once.
	sell := func(svc *ledger.Service, mode string, from, to int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 150)
		for i := from; i < to; i++ {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if _, err := svc.Deduct(ctx, ledger.MustDeductCommand(sku, fmt.Sprint("u", i), 1, fmt.Sprint(mode, "-", i))); err != nil {
					t.Errorf("deduct %d through the %s process: %v", i, mode, err)
				}
			})
		}
		wg.Wait()
	}
	// Before the switch, during it (both processes selling), after it.
	sell(s.Service, "per-event", 0, buyers/3)
	var both sync.WaitGroup
	both.Go(func() { sell(s.Service, "per-event", buyers/3, buyers/2) })
	both.Go(func() { sell(perCall.Service, "per-call", buyers/2, 2*buyers/3) })
	both.Wait()
	sell(perCall.Service, "per-call", 2*buyers/3, buyers)
	if t.Failed() {
		t.FailNow()
	}

	msgs, err := s.RedisClient.XRange(ctx, s.Keyspace.SKUStreamKey(sku), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	byOld, batched := 0, 0
	for _, m := range msgs {
		fields := streamentry.EntryFields(m.Values)
		if !strings.HasPrefix(fields["request_id"], "per-event-") {
			if strings.Contains(fields["e"], "\n") {
				batched++
			}
			continue
		}
		byOld++
		for k, v := range fields {
			if k != "e" && k != "user" && k != "request_id" && k != "tp" {
				t.Errorf("per-event entry %s has field %s, which 1.0.0's deduct.lua never wrote", m.ID, k)
			}
			if strings.Contains(v, "\n") {
				t.Errorf("per-event entry %s: field %s holds a newline: %q", m.ID, k, v)
			}
		}
		if _, err := streamentry.ParseMessage(m); err != nil {
			t.Errorf("per-event entry %s is not an entry of one event: %v", m.ID, err)
		}
		if n := len(strings.Split(fields["e"], " ")); n != 6 {
			t.Errorf("per-event entry %s: e holds %d values, 1.0.0 reads 6: %q", m.ID, n, fields["e"])
		}
	}
	if byOld != buyers/2 || batched == 0 {
		t.Fatalf("%d entries of the per-event process (want one per purchase, %d), %d entries of several events of the per-call one (want some)",
			byOld, buyers/2, batched)
	}

	s.RunProjector(t)
	s.WaitProjected(t, sku, 60*time.Second)
	assertLedgerEqualsStream(t, s, sku)
	var rows, ids, seqs int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id), count(DISTINCT seq) FROM ledger_entries WHERE sku = $1`,
		sku).Scan(&rows, &ids, &seqs); err != nil {
		t.Fatal(err)
	}
	if rows != buyers+1 || ids != rows || seqs != rows {
		t.Fatalf("ledger: %d rows, %d event ids, %d seqs; want %d each", rows, ids, seqs, buyers+1)
	}
	page, err := s.App.DeadLetters.List(ctx, ledger.DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.DeadLetters) != 0 {
		t.Fatalf("dead letters: %+v", page.DeadLetters)
	}
}
