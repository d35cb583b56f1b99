package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// sellBoth sells sku a deduction (request r1) and a hold (request h1)
// and returns them with the commands that made them.
func sellBoth(t *testing.T, s *stacktest.Stack, sku string) (ledger.DeductCommand, domain.Receipt, ledger.ReserveCommand, domain.Hold) {
	t.Helper()
	ctx := context.Background()
	deduct := ledger.MustDeductCommand(sku, "u1", 1, "r1")
	receipt, err := s.Service.Deduct(ctx, deduct)
	if err != nil {
		t.Fatal(err)
	}
	reserve, err := s.App.Holds.NewReserveCommand(sku, "u2", 1, "h1", nil)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := s.App.Holds.Reserve(ctx, reserve)
	if err != nil {
		t.Fatal(err)
	}
	return deduct, receipt, reserve, hold
}

// corrupt writes garbage over r1's receipt and h1's hold record, as a hand
// edit or a bug would.
func corrupt(t *testing.T, s *stacktest.Stack, sku string, hold domain.Hold) {
	t.Helper()
	ctx := context.Background()
	key, field := s.ReceiptAt(t, sku, "r1")
	if err := s.RedisClient.HSet(ctx, key, field, "garbage").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RedisClient.HSet(ctx, s.Keyspace.SKUKey(sku), "hold:"+hold.HoldID, "garbage").Err(); err != nil {
		t.Fatal(err)
	}
}

// wantOriginals retries the deduction and the reserve until they answer,
// within a deadline, and checks that they answer the original receipt and
// hold.
func wantOriginals(t *testing.T, s *stacktest.Stack, deduct ledger.DeductCommand, receipt domain.Receipt,
	reserve ledger.ReserveCommand, hold domain.Hold) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		again, err := s.Service.Deduct(ctx, deduct)
		if err == nil {
			if !again.Replayed || again.EventID != receipt.EventID || again.Seq != receipt.Seq || again.Remaining != receipt.Remaining {
				t.Fatalf("retry after the repair = %+v, want the original %+v", again, receipt)
			}
			break
		}
		if !errors.Is(err, domain.ErrCorruptRecord) || time.Now().After(deadline) {
			t.Fatalf("deduct retry: %v; want the original receipt once the record is rebuilt", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		again, err := s.App.Holds.Reserve(ctx, reserve)
		if err == nil {
			if !again.Replayed || again.EventID != hold.EventID || again.Seq != hold.Seq || again.Remaining != hold.Remaining ||
				!again.ExpiresAt.Equal(hold.ExpiresAt) || again.Status != domain.HoldHeld {
				t.Fatalf("reserve retry after the repair = %+v, want the original %+v", again, hold)
			}
			return
		}
		if !errors.Is(err, domain.ErrCorruptRecord) || time.Now().After(deadline) {
			t.Fatalf("reserve retry: %v; want the original hold once the record is rebuilt", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestACorruptRecordAnswersUnavailableUntilTheLedgerRebuildsIt corrupts a
// sold receipt and a hold record before the projector has written their
// events: retries answer unavailable while the ledger is behind, the
// corruption is counted and alerted with its SKU and request id, and once
// the projector catches up the records are rebuilt and the retries get the
// original receipt and hold.
func TestACorruptRecordAnswersUnavailableUntilTheLedgerRebuildsIt(t *testing.T) {
	t.Parallel()
	sink := &alertSink{}
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.Alerter = sink }))
	ctx := context.Background()
	s.SKU(t, "mend", 10, 1)
	deduct, receipt, reserve, hold := sellBoth(t, s, "mend")
	corrupt(t, s, "mend", hold)
	receiptKey, receiptField := s.ReceiptAt(t, "mend", "r1")

	// No projector yet: the ledger holds none of the events, so the repair
	// waits, and every retry answers unavailable meanwhile.
	for range 3 {
		if _, err := s.Service.Deduct(ctx, deduct); !errors.Is(err, domain.ErrCorruptRecord) || domain.CodeOf(err) != domain.CodeUnavailable {
			t.Fatalf("deduct retry over a corrupt receipt: %v (%s), want unavailable", err, domain.CodeOf(err))
		}
		if _, err := s.App.Holds.Reserve(ctx, reserve); !errors.Is(err, domain.ErrCorruptRecord) || domain.CodeOf(err) != domain.CodeUnavailable {
			t.Fatalf("reserve retry over a corrupt hold record: %v (%s), want unavailable", err, domain.CodeOf(err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got, err := s.RedisClient.HGet(ctx, receiptKey, receiptField).Result(); err != nil || got != "garbage" {
		t.Fatalf("the receipt was rewritten to %q (%v) before the ledger held its event", got, err)
	}

	s.RunProjector(t)
	wantOriginals(t, s, deduct, receipt, reserve, hold)

	// Each record once, however many retries met it.
	if err := testutil.GatherAndCompare(s.App.Metrics.Registry, strings.NewReader(`
# HELP invledger_corrupt_records_total Corrupt receipts, hold records, SKU states and partition keys met by a call, the hold sweeper or a reconciliation, by kind; meetings while its repair runs count once.
# TYPE invledger_corrupt_records_total counter
invledger_corrupt_records_total{kind="hold"} 1
invledger_corrupt_records_total{kind="partition_key"} 0
invledger_corrupt_records_total{kind="receipt"} 1
invledger_corrupt_records_total{kind="sku"} 0
`), "invledger_corrupt_records_total"); err != nil {
		t.Error(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	alerted := map[string]bool{}
	for _, f := range sink.findings {
		if f.Class == reconcile.ClassCorruptRecord && f.SKU == "mend" {
			alerted[f.RequestID+" "+f.HoldID] = true
		}
	}
	if !alerted["r1 "] || !alerted["h1 "+hold.HoldID] || len(alerted) != 2 {
		t.Fatalf("alerted %v, want the receipt of r1 and the hold record %s of h1", alerted, hold.HoldID)
	}
}

// TestAReconcileThatNamesASKURepairsItsCorruptRecords corrupts records no
// call meets: the periodic pass, which names no SKU, does not read every
// record; a run naming the SKU reports them with their request ids, and
// with repair rebuilds them, after which retries get the originals.
func TestAReconcileThatNamesASKURepairsItsCorruptRecords(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "named", 10, 1)
	s.RunProjector(t)
	deduct, receipt, reserve, hold := sellBoth(t, s, "named")
	waitCaughtUp(t, s, "named")
	corrupt(t, s, "named", hold)
	sink := &alertSink{}
	rec := newReconciler(t, s, sink)

	rep, err := rec.Run(ctx, reconcile.Options{Repair: true, Trigger: "interval"})
	if err != nil {
		t.Fatal(err)
	}
	if got := classes(rep)["named"]; len(got) != 0 {
		t.Fatalf("the periodic pass found %v: it must not read every record", got)
	}
	rep, err = rec.Run(ctx, reconcile.Options{SKUs: []string{"named"}, Trigger: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range rep.Drifts {
		if f.Class != reconcile.ClassCorruptRecord || f.Repaired {
			t.Fatalf("report-only run found %+v", f)
		}
		found[f.RequestID+" "+f.HoldID] = true
	}
	if !found["r1 "] || !found[" "+hold.HoldID] || len(found) != 2 {
		t.Fatalf("run naming the SKU found %v, want the receipt of r1 and the hold record %s", found, hold.HoldID)
	}
	rep, err = rec.Run(ctx, reconcile.Options{SKUs: []string{"named"}, Repair: true, Trigger: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Repaired) != 2 || len(rep.Drifts) != 2 {
		t.Fatalf("repairing run: drifts %+v, repaired %d; want both records repaired", rep.Drifts, len(rep.Repaired))
	}
	for _, f := range rep.Repaired {
		if f.HoldID != "" && f.RequestID != "h1" {
			t.Fatalf("repaired hold record names request id %q, want h1 from the ledger", f.RequestID)
		}
	}
	wantOriginals(t, s, deduct, receipt, reserve, hold)
	rep, err = rec.Run(ctx, reconcile.Options{SKUs: []string{"named"}, Trigger: "cli"})
	if err != nil || len(rep.Drifts) != 0 {
		t.Fatalf("after the repair: %+v, %v; want no finding", rep.Drifts, err)
	}
}

// TestCloseStopsTheRecordRepairsItStarted: a repair waiting for a ledger
// that is behind ends when the reconciler closes, so none outlives the
// clients it uses; a record met after Close is counted and answered
// unavailable, and no repair starts for it.
func TestCloseStopsTheRecordRepairsItStarted(t *testing.T) {
	t.Parallel()
	sink := &alertSink{}
	s := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.Alerter = sink }))
	ctx := context.Background()
	s.SKU(t, "closing", 10, 1)
	deduct, _, _, hold := sellBoth(t, s, "closing")
	corrupt(t, s, "closing", hold)
	receiptKey, receiptField := s.ReceiptAt(t, "closing", "r1")
	// No projector: the repair this starts waits for the ledger.
	if _, err := s.Service.Deduct(ctx, deduct); !errors.Is(err, domain.ErrCorruptRecord) {
		t.Fatalf("deduct retry over a corrupt receipt: %v, want a corrupt record", err)
	}

	closed := make(chan struct{})
	go func() { s.App.Reconciler.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10s: it waits for a repair it did not stop")
	}
	if _, err := s.Service.Deduct(ctx, deduct); !errors.Is(err, domain.ErrCorruptRecord) {
		t.Fatalf("deduct retry after Close: %v, want a corrupt record", err)
	}
	if got, err := s.RedisClient.HGet(ctx, receiptKey, receiptField).Result(); err != nil || got != "garbage" {
		t.Fatalf("the receipt became %q (%v): a repair ran though the ledger does not hold its event", got, err)
	}
	if err := testutil.GatherAndCompare(s.App.Metrics.Registry, strings.NewReader(`
# HELP invledger_corrupt_records_total Corrupt receipts, hold records, SKU states and partition keys met by a call, the hold sweeper or a reconciliation, by kind; meetings while its repair runs count once.
# TYPE invledger_corrupt_records_total counter
invledger_corrupt_records_total{kind="hold"} 0
invledger_corrupt_records_total{kind="partition_key"} 0
invledger_corrupt_records_total{kind="receipt"} 2
invledger_corrupt_records_total{kind="sku"} 0
`), "invledger_corrupt_records_total"); err != nil {
		t.Error(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var alerts int
	for _, f := range sink.findings {
		if f.Class == reconcile.ClassCorruptRecord {
			alerts++
		}
	}
	if alerts != 1 {
		t.Fatalf("%d corrupt_record alerts, want 1: none for a record met after Close, whose repair does not start", alerts)
	}
}
