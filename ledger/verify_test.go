package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/stacktest"
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

	rep, err := ledger.VerifyChains(ctx, s.Seals, "", nil)
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
	rep, err = ledger.VerifyChains(ctx, s.Seals, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Broken) != 1 || rep.Broken[0].SKU != "chain-a" || rep.Broken[0].Seq != 4 || !strings.Contains(rep.Broken[0].Reason, "hash") {
		t.Fatalf("edited ledger: %+v, want chain-a broken at seq 4", rep.Broken)
	}
	if one, err := ledger.VerifyChains(ctx, s.Seals, "chain-b", nil); err != nil || len(one.Broken) != 0 || one.Events != 7 {
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
	if one, err := ledger.VerifyChains(ctx, s.Seals, "chain-b", nil); err != nil || len(one.Broken) != 0 || one.Events != 8 {
		t.Fatalf("chain-b after restore and a new sale: %+v %v", one, err)
	}
}
