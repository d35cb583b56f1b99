package redisinventory_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// reports records what an inventory reported corrupt.
type reports struct {
	mu   sync.Mutex
	recs []ledger.CorruptRecord
}

func (r *reports) ReportCorrupt(_ context.Context, rec ledger.CorruptRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
}

func (r *reports) take() []ledger.CorruptRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.recs
	r.recs = nil
	return got
}

// wantCorrupt checks that err is the unavailable answer of a corrupt
// record, and that rec, and only rec, was reported.
func wantCorrupt(t *testing.T, what string, err error, rep *reports, rec ledger.CorruptRecord) {
	t.Helper()
	if !errors.Is(err, domain.ErrCorruptRecord) || domain.CodeOf(err) != domain.CodeUnavailable {
		t.Fatalf("%s: %v (%s), want a corrupt record answered unavailable", what, err, domain.CodeOf(err))
	}
	var ce *ledger.CorruptRecordError
	if !errors.As(err, &ce) || ce.Record != rec {
		t.Fatalf("%s: error names %+v, want %+v", what, ce, rec)
	}
	if got := rep.take(); len(got) != 1 || got[0] != rec {
		t.Fatalf("%s: reported %+v, want %+v", what, got, rec)
	}
}

// TestEveryCallThatMeetsACorruptRecordAnswersUnavailableAndReportsIt
// corrupts receipts and hold records and meets them through every call
// that reads them: each answers unavailable (a retry may succeed once the
// record is rebuilt), names the record, reports it once, and writes nothing.
func TestEveryCallThatMeetsACorruptRecordAnswersUnavailableAndReportsIt(t *testing.T) {
	t.Parallel()
	forEachLayout(t, everyCallThatMeetsACorruptRecordAnswersUnavailable)
}

func everyCallThatMeetsACorruptRecordAnswersUnavailable(t *testing.T, f *fixture) {
	ctx := context.Background()
	rep := &reports{}
	inv := must(redisinventory.NewRedisInventory(f.client, f.keys, redisinventory.InventoryConfig{Corrupt: rep}))
	sku := f.warm(t, "damaged", 100, 5)
	s := sku.String()
	ttl := must(domain.HoldConfig{MaxTTL: time.Hour, DefaultTTL: time.Hour}.NewHoldTTL(nil))
	user := must(domain.NewUserID("u1"))
	one := must(domain.NewQuantity(1))
	req := func(id string) domain.RequestID { return must(domain.NewRequestID(id)) }
	holdOf := func(id string) domain.HoldID { return domain.HoldIDFor(sku, req(id)) }
	for _, id := range []string{"d1", "d2"} {
		if _, err := inv.Deduct(ctx, sku, user, one, req(id), uuid.NewString()); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"h1", "h2", "h3"} {
		if _, err := inv.Reserve(ctx, sku, user, one, req(id), ttl, "", uuid.NewString()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := inv.ConfirmHold(ctx, sku, holdOf("h3"), uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	// Garbage, a value that only starts like a released receipt, a hold
	// record of another shape, and one of the right shape with a figure
	// that is no number.
	f.plantReceipt(t, s, "d1", "garbage")
	f.plantReceipt(t, s, "d2", "R7:garbage")
	h1, h2, h3 := holdOf("h1").String(), holdOf("h2").String(), holdOf("h3").String()
	f.client.HSet(ctx, f.keys.SKUKey(s), "hold:"+h1, "held\ngarbage")
	record := must(f.client.HGet(ctx, f.keys.SKUKey(s), "hold:"+h2).Result())
	f.client.HSet(ctx, f.keys.SKUKey(s), "hold:"+h2, strings.Replace(record, "\n", "\nx", 1),
		"hold:"+h3, "garbage")
	before := f.snapshot(t)

	receipt := func(id string) ledger.CorruptRecord {
		return ledger.CorruptRecord{SKU: s, Kind: ledger.RecordReceipt, RequestID: id}
	}
	hold := func(req, id string) ledger.CorruptRecord {
		return ledger.CorruptRecord{SKU: s, Kind: ledger.RecordHold, RequestID: req, HoldID: id}
	}
	_, err := inv.Deduct(ctx, sku, user, one, req("d1"), uuid.NewString())
	wantCorrupt(t, "deduct retry of a garbage receipt", err, rep, receipt("d1"))
	_, err = inv.Deduct(ctx, sku, user, one, req("d2"), uuid.NewString())
	wantCorrupt(t, "deduct retry of a half released receipt", err, rep, receipt("d2"))
	_, err = inv.Release(ctx, sku, user, req("d1"), must(domain.NewReason("")), uuid.NewString())
	wantCorrupt(t, "release of a garbage receipt", err, rep, receipt("d1"))
	_, err = inv.Reserve(ctx, sku, user, one, req("h1"), ttl, "", uuid.NewString())
	wantCorrupt(t, "reserve retry of a garbage hold record", err, rep, hold("h1", h1))
	_, err = inv.ConfirmHold(ctx, sku, holdOf("h2"), uuid.NewString())
	wantCorrupt(t, "confirm of a hold record with a figure that is no number", err, rep, hold("", h2))
	_, err = inv.CancelHold(ctx, sku, holdOf("h1"), uuid.NewString())
	wantCorrupt(t, "cancel of a garbage hold record", err, rep, hold("", h1))
	_, err = inv.Hold(ctx, sku, holdOf("h2"))
	wantCorrupt(t, "read of a corrupt hold record", err, rep, hold("", h2))
	// The release of a confirmed hold's sale reads its hold record: it
	// must do so before its first write.
	_, err = inv.Release(ctx, sku, user, req("h3"), must(domain.NewReason("")), uuid.NewString())
	wantCorrupt(t, "release of a sale whose hold record is corrupt", err, rep, hold("h3", h3))
	assertSame(t, before, f.snapshot(t))

	// The sweeper, when a held hold's deadline passes: the call that
	// meets the record cannot say which of its holds it was, so the
	// sweeper finds out and reports that one.
	sw := must(redisinventory.NewSweeper(f.client, f.keys, redisinventory.SweeperConfig{Corrupt: rep}))
	if err := f.client.ZAddXX(ctx, f.keys.SKUExpiryKey(s), redis.Z{Score: 0, Member: s + " " + h1}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.ExpireDue(ctx); err == nil {
		t.Fatal("the sweeper expired a hold whose record is corrupt")
	}
	if got := rep.take(); len(got) != 1 || got[0] != hold("", h1) {
		t.Fatalf("the sweeper reported %+v, want %+v", got, hold("", h1))
	}

	// The reconciler's look at the SKU finds exactly these records.
	found := must(f.reconcile.CorruptRecords(ctx, sku))
	want := map[ledger.CorruptRecord]bool{receipt("d1"): true, receipt("d2"): true,
		{SKU: s, Kind: ledger.RecordHold, HoldID: h1}: true, {SKU: s, Kind: ledger.RecordHold, HoldID: h2}: true,
		{SKU: s, Kind: ledger.RecordHold, HoldID: h3}: true}
	for _, rec := range found {
		if !want[rec] {
			t.Errorf("CorruptRecords found %+v, which is sound", rec)
		}
		delete(want, rec)
	}
	if len(want) > 0 {
		t.Errorf("CorruptRecords missed %v", want)
	}
}

// TestRecordRepairRewritesOnlyTheCorruptValueItRead probes and rewrites
// records with the repair's scripts: the probe reads a record as the
// scripts do, with the SKU's seq; the rewrite writes the ledger's record in
// the restore's format only while the field still holds the value the
// probe read and the SKU is verified under this Redis run, and deletes a
// record the ledger has none of.
func TestRecordRepairRewritesOnlyTheCorruptValueItRead(t *testing.T) {
	t.Parallel()
	forEachLayout(t, recordRepairRewritesOnlyTheCorruptValueItRead)
}

func recordRepairRewritesOnlyTheCorruptValueItRead(t *testing.T, f *fixture) {
	ctx := context.Background()
	sku := f.warm(t, "mended", 10, 5)
	s := sku.String()
	orig := must(deduct(t, f, sku, "u1", 2, "r1", uuid.NewString()))
	must(deduct(t, f, sku, "u2", 1, "r2", uuid.NewString()))
	key, field := f.receiptAt(t, s, "r1")
	sound := must(f.client.HGet(ctx, key, field).Result())
	f.plantReceipt(t, s, "r1", "garbage")
	f.plantReceipt(t, s, "stray", "more garbage")
	rec := ledger.CorruptRecord{SKU: s, Kind: ledger.RecordReceipt, RequestID: "r1"}

	p := must(f.restorer.ProbeRecord(ctx, rec))
	if !p.Corrupt || p.Value != "garbage" || p.Seq != 3 {
		t.Fatalf("probe = %+v, want corrupt value garbage at seq 3", p)
	}
	if p := must(f.restorer.ProbeRecord(ctx, ledger.CorruptRecord{SKU: s, Kind: ledger.RecordReceipt, RequestID: "r2"})); p.Corrupt {
		t.Fatalf("probe of a sound receipt = %+v", p)
	}
	// The ledger's fold, as the repair hands it over.
	st := domain.NewSKUState(s)
	st.Requests["r1"] = domain.Purchase{User: "u1", Qty: 2, EventID: orig.EventID, Seq: orig.Seq, Remaining: orig.Remaining}

	// A value other than the one read: someone repaired or restored it since.
	if err := f.restorer.RewriteRecord(ctx, rec, "other", st); !errors.Is(err, ledger.ErrSeqMoved) {
		t.Fatalf("rewrite over another value: %v, want ErrSeqMoved", err)
	}
	// A SKU not verified under this run: a restore or a verification owns it.
	fence := must(f.client.HGet(ctx, f.keys.SKUKey(s), "fence").Result())
	f.client.HSet(ctx, f.keys.SKUKey(s), "fence", "restoring:x")
	if err := f.restorer.RewriteRecord(ctx, rec, "garbage", st); !errors.Is(err, domain.ErrRecovering) {
		t.Fatalf("rewrite of a fenced SKU: %v, want recovering", err)
	}
	if got := must(f.client.HGet(ctx, key, field).Result()); got != "garbage" {
		t.Fatalf("refused rewrites wrote %q", got)
	}
	f.client.HSet(ctx, f.keys.SKUKey(s), "fence", fence)

	if err := f.restorer.RewriteRecord(ctx, rec, "garbage", st); err != nil {
		t.Fatal(err)
	}
	if got := must(f.client.HGet(ctx, key, field).Result()); got != sound {
		t.Fatalf("rewritten receipt %q, want the original %q", got, sound)
	}
	again := must(deduct(t, f, sku, "u1", 2, "r1", uuid.NewString()))
	if !again.Replayed || again.EventID != orig.EventID || again.Seq != orig.Seq || again.Remaining != orig.Remaining {
		t.Fatalf("retry after the rewrite = %+v, want the original %+v", again, orig)
	}
	stray := ledger.CorruptRecord{SKU: s, Kind: ledger.RecordReceipt, RequestID: "stray"}
	if err := f.restorer.RewriteRecord(ctx, stray, "more garbage", st); err != nil {
		t.Fatal(err)
	}
	// records fails on a one-hash SKU whose count of receipts is off.
	if receipts, _ := f.records(t, s); receipts["stray"] != "" || len(receipts) != 2 {
		t.Fatalf("receipts after the repair: %v, want r1 and r2: the ledger has no stray", receipts)
	}
}
