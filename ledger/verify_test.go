package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestVerifyChainsCatchesAnEditedRow(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	for _, sku := range []string{"chain-a", "chain-b"} {
		s.SKU(t, sku, 10, 1)
		for i := range 5 {
			u := fmt.Sprint("u", i)
			if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, u, 1, u)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, "u1", "u1", "refund")); err != nil {
			t.Fatal(err)
		}
	}
	s.ProjectStreams(t)

	rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SKUs != 2 || rep.Events != 14 || len(rep.Broken) != 0 {
		t.Fatalf("honest ledger: %+v, want 2 SKUs, 14 events, nothing broken", rep)
	}

	// A superuser goes around the append-only triggers and edits seq 4.
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, stmt := range []string{
		`ALTER TABLE ledger_entries DISABLE TRIGGER USER`,
		`UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'chain-a' AND seq = 4`,
		`ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_update_delete`,
		`ALTER TABLE ledger_entries ENABLE ALWAYS TRIGGER ledger_entries_no_truncate`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) != 1 || rep.Broken[0].SKU != "chain-a" || rep.Broken[0].Seq != 4 || !strings.Contains(rep.Broken[0].Reason, "hash") {
		t.Fatalf("edited ledger: %+v, want chain-a broken at seq 4", rep.Broken)
	}
	if one, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{SKU: "chain-b"}); err != nil || len(one.Broken) != 0 || one.Events != 7 {
		t.Fatalf("chain-b alone: %+v %v", one, err)
	}

	// After Redis loses everything and is restored from the ledger, the
	// chain continues from the ledger's last hash.
	if err := s.RedisClient.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Recovery(t).RestoreSKU(ctx, "chain-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("chain-b", "late", 1, "late")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	if one, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{SKU: "chain-b"}); err != nil || len(one.Broken) != 0 || one.Events != 8 {
		t.Fatalf("chain-b after restore and a new sale: %+v %v", one, err)
	}
}

// TestSealedChainCatchesTampering goes around the append-only triggers as
// a superuser, after the sealer linked the rows, and checks that audit
// verify names each kind of tampering by seq: an edited row, a deleted
// row, and a forged row inserted out of order (in place of a deleted row
// and its seal, or beyond a missing seq, where the sealer refuses to seal).
func TestSealedChainCatchesTampering(t *testing.T) {
	t.Parallel()
	s := sale(t, "", "seal-edit", "seal-delete", "seal-insert", "seal-beyond")
	ctx := context.Background()
	rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SKUs != 4 || rep.Events != 24 || rep.Sealed != 24 || len(rep.Broken) != 0 || len(rep.Unsealed) != 0 {
		t.Fatalf("honest ledger: %+v, want 4 SKUs, 24 events, all sealed, nothing broken", rep)
	}
	var sha256Seals int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_seals WHERE algorithm = 'sha256'`).Scan(&sha256Seals); err != nil || sha256Seals != 24 {
		t.Fatalf("%d sha256 seals (%v), want 24", sha256Seals, err)
	}

	stacktest.Superuser(t, s.Pool,
		`UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'seal-edit' AND seq = 3`,
		`DELETE FROM ledger_entries WHERE sku = 'seal-delete' AND seq = 4`,
		// A forged row in place of seq 4, its seal removed with the original.
		`DELETE FROM ledger_seals WHERE sku = 'seal-insert' AND seq = 4`,
		`DELETE FROM ledger_entries WHERE sku = 'seal-insert' AND seq = 4`,
		`INSERT INTO ledger_entries (event_id, sku, seq, type, delta, qty, balance_after, user_id, request_id, occurred_at, stream_id)
		 VALUES (gen_random_uuid(), 'seal-insert', 4, 'deducted', -1, 1, 7, 'mallory', 'forged', now(), '0-1')`,
	)
	// A row past the end, leaving seq 7 missing, through the projector's own
	// path, as an event arriving before its predecessor does.
	if _, err := s.Projection.AppendBatch(ctx, []domain.Event{{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: "seal-beyond",
		Seq: 8, Qty: 1, Delta: -1, Balance: 3, User: "late", RequestID: "late", OccurredAt: time.Now(), StreamID: "0-2"}}); err != nil {
		t.Fatal(err)
	}
	pass := s.Seal(t)
	if len(pass.Waiting) != 1 || pass.Waiting[0].SKU != "seal-beyond" || pass.Waiting[0].Seq != 7 {
		t.Fatalf("sealer: %+v, want it to wait at seal-beyond seq 7", pass)
	}
	rep, err = ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantBroken(t, rep.Broken, map[string]brokenAt{
		"seal-edit":   {3, "does not match"},
		"seal-delete": {4, "deleted"},
		"seal-insert": {4, "inserted out of order"},
	})
	if len(rep.Unsealed) != 1 || rep.Unsealed[0].SKU != "seal-beyond" || rep.Unsealed[0].SealedTo != 6 || !rep.Unsealed[0].Missing {
		t.Fatalf("unsealed: %+v, want seal-beyond sealed to 6 with seq 7 missing", rep.Unsealed)
	}

	// The gap closes: the sealer links seq 7 and the row that waited.
	if _, err := s.Projection.AppendBatch(ctx, []domain.Event{{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: "seal-beyond",
		Seq: 7, Qty: 1, Delta: -1, Balance: 4, User: "gap", RequestID: "gap", OccurredAt: time.Now(), StreamID: "0-3"}}); err != nil {
		t.Fatal(err)
	}
	if pass := s.Seal(t); len(pass.Waiting) != 0 || pass.Sealed[domain.SealSHA256] != 2 {
		t.Fatalf("sealer after the gap closed: %+v, want seqs 7 and 8 sealed", pass)
	}
	if one, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{SKU: "seal-beyond"}); err != nil || len(one.Broken) != 0 || len(one.Unsealed) != 0 || one.Sealed != 8 {
		t.Fatalf("seal-beyond after the gap closed: %+v %v", one, err)
	}

}

// TestVerifyChainsSealsEveryEventTypeAndItsHoldFields seals a SKU whose
// ledger holds every event type: stocked, deducted, released, adjusted,
// reserved and each way a hold ends (confirmed, cancelled, expired), an
// order's line, the refund of that line and closed. The honest chain
// verifies in full; then each hold column of the order line's reserved row
// and of its refund's released row is edited in turn, as a
// superuser going around the append-only triggers, and verify names
// exactly that seq, and nothing once the edit is undone.
func TestVerifyChainsSealsEveryEventTypeAndItsHoldFields(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "every-type"
	s.SKU(t, sku, 20, 10)
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "buyer", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, "buyer", "r1", "refund")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)
	adj, err := s.App.Adjustments.Request(ctx, sku, 5, "found a box", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Adjustments.Approve(ctx, adj.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	holds := s.App.Holds
	reserve := func(user string, ttl int64) ledger.HoldRef {
		t.Helper()
		cmd, err := holds.NewReserveCommand(sku, user, 1, "hold-"+user, &ttl)
		if err != nil {
			t.Fatal(err)
		}
		h, err := holds.Reserve(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := ledger.NewHoldRef(sku, h.HoldID)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	if _, err := holds.Confirm(ctx, reserve("confirms", 60)); err != nil {
		t.Fatal(err)
	}
	if _, err := holds.Cancel(ctx, reserve("cancels", 60)); err != nil {
		t.Fatal(err)
	}
	reserve("lets-expire", 1)
	time.Sleep(1100 * time.Millisecond)
	if n, err := s.App.HoldExpiry.Expire(ctx); err != nil || n != 1 {
		t.Fatalf("expire = %d, %v; want one hold expired", n, err)
	}
	ttl := int64(60)
	place, err := s.App.Orders.NewPlaceOrderCommand("ord-1", "orderer", &ttl, []ledger.OrderLineInput{{SKU: sku, Qty: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.App.Orders.Place(ctx, place); err != nil {
		t.Fatal(err)
	}
	order, _ := domain.NewOrderID("ord-1")
	if _, err := s.App.Orders.Confirm(ctx, order); err != nil {
		t.Fatal(err)
	}
	// A refund of the order's line: its release carries the line's hold fields.
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand(sku, "orderer", order.LineRequestID(mustSKU(t, sku)).String(), "refund")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Archiver(t).CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)

	var types []string
	if err := s.Pool.QueryRow(ctx, `SELECT array_agg(DISTINCT type ORDER BY type) FROM ledger_entries WHERE sku = $1`, sku).Scan(&types); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(types, " "), "adjusted cancelled closed confirmed deducted expired released reserved stocked"; got != want {
		t.Fatalf("event types %q, want %q", got, want)
	}
	var line int64
	if err := s.Pool.QueryRow(ctx, `SELECT seq FROM ledger_entries WHERE sku = $1 AND type = 'reserved' AND order_id = 'ord-1'`, sku).Scan(&line); err != nil {
		t.Fatal(err)
	}
	var refund int64
	if err := s.Pool.QueryRow(ctx, `SELECT seq FROM ledger_entries WHERE sku = $1 AND type = 'released' AND order_id = 'ord-1' AND hold_id IS NOT NULL`,
		sku).Scan(&refund); err != nil {
		t.Fatalf("the refund of the order's line, with its hold fields: %v", err)
	}
	var rows int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE sku = $1`, sku).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	honest := func(what string) {
		t.Helper()
		rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{SKU: sku})
		if err != nil || rep.Events != rows || rep.Sealed != rows || len(rep.Broken) != 0 || len(rep.Unsealed) != 0 {
			t.Fatalf("%s: %+v %v, want %d events, all sealed, nothing broken", what, rep, err, rows)
		}
	}
	honest("honest ledger")

	for _, edit := range []struct {
		seq        int64
		column, to string
	}{
		{line, "hold_id", "gen_random_uuid()"},
		{line, "order_id", "'ord-2'"},
		{line, "expires_at", "expires_at + interval '1 hour'"},
		{refund, "hold_id", "gen_random_uuid()"},
		{refund, "order_id", "'ord-2'"},
	} {
		where := fmt.Sprintf(`WHERE sku = '%s' AND seq = %d`, sku, edit.seq)
		var was string
		if err := s.Pool.QueryRow(ctx, `SELECT quote_literal(`+edit.column+`) FROM ledger_entries `+where).Scan(&was); err != nil {
			t.Fatal(err)
		}
		stacktest.Superuser(t, s.Pool, `UPDATE ledger_entries SET `+edit.column+` = `+edit.to+` `+where)
		rep, err := ledger.VerifyChains(ctx, s.Seals, ledger.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Broken) != 1 || rep.Broken[0].SKU != sku || rep.Broken[0].Seq != edit.seq || !strings.Contains(rep.Broken[0].Reason, "does not match") {
			t.Fatalf("%s edited at seq %d: broken %+v, want exactly that seq", edit.column, edit.seq, rep.Broken)
		}
		stacktest.Superuser(t, s.Pool, `UPDATE ledger_entries SET `+edit.column+` = `+was+` `+where)
		honest(edit.column + " restored")
	}
}

// brokenAt is the seq where a SKU's chain should break and what the reason
// should say.
type brokenAt struct {
	seq  int64
	says string
}

// wantBroken checks that exactly the SKUs of want are broken, each where
// and as want says.
func wantBroken(t *testing.T, broken []ledger.BrokenChain, want map[string]brokenAt) {
	t.Helper()
	if len(broken) != len(want) {
		t.Fatalf("tampered ledger: broken %+v, want %d chains", broken, len(want))
	}
	for _, b := range broken {
		if w, ok := want[b.SKU]; !ok || b.Seq != w.seq || !strings.Contains(b.Reason, w.says) {
			t.Errorf("broken %+v, want seq %d saying %q", b, w.seq, w.says)
		}
	}
}
