package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// TestOperationsRecordWhoDidIt: create, warm, close, archive, restore and
// rebuild are each recorded once, with the context's actor, and the
// periodic archiver acts as system:archiver; operations that change nothing
// (a second warm, a second close, a rebuild of a correct row) record
// nothing.
func TestOperationsRecordWhoDidIt(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	alice := ledger.WithActor(context.Background(), "alice")
	cli := ledger.WithActor(context.Background(), "cli:root")
	if _, _, err := s.Service.CreateSKU(alice, ledger.CreateSKUCommand{SKU: "op-1", Stock: 5, PerUserLimit: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Service.Warm(alice, "op-1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Service.Deduct(context.Background(), ledger.MustDeductCommand("op-1", "u1", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Archiver(t).CloseSKU(ledger.WithActor(context.Background(), "bob"), "op-1"); err != nil {
			t.Fatal(err)
		}
	}
	s.ProjectStreams(t)
	if res, err := s.Archiver(t).ArchiveClosed(context.Background(), 0); err != nil || len(res) != 1 {
		t.Fatalf("archive: %+v %v", res, err)
	}
	if _, err := s.Pool.Exec(context.Background(), `UPDATE balances SET balance = balance + 3 WHERE sku = 'op-1'`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Recovery(t).RebuildBalances(cli, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RedisClient.Del(context.Background(), s.Keyspace.SKUKey("op-1")).Result(); err != nil {
		t.Fatal(err)
	}
	if err := s.Recovery(t).RestoreSKU(cli, "op-1"); err != nil {
		t.Fatal(err)
	}

	page, err := s.App.Auditor.Operations(context.Background(), ledger.OperationQuery{SKU: "op-1", Limit: 4})
	if err != nil || page.NextAfter == nil {
		t.Fatalf("first page: %+v %v, want 4 rows and a next page", page, err)
	}
	rest, err := s.App.Auditor.Operations(context.Background(), ledger.OperationQuery{SKU: "op-1", After: *page.NextAfter})
	if err != nil || rest.NextAfter != nil {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	var got []string
	for _, op := range append(page.Operations, rest.Operations...) {
		if op.SKU != "op-1" || op.At.IsZero() || op.Detail == "" {
			t.Errorf("operation %+v: want sku, time and detail", op)
		}
		got = append(got, fmt.Sprintf("%s by %s", op.Action, op.Actor))
	}
	want := []string{"create by alice", "warm by alice", "close by bob", "archive by system:archiver", "rebuild by cli:root", "restore by cli:root"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("operations:\n got %v\nwant %v", got, want)
	}
	if _, err := s.App.Auditor.Operations(context.Background(), ledger.OperationQuery{SKU: "never"}); domain.CodeOf(err) != domain.CodeNotFound {
		t.Fatalf("operations of an undefined sku: %v, want not_found", err)
	}
	if _, err := s.Pool.Exec(context.Background(), `UPDATE operations SET actor = 'mallory'`); err == nil {
		t.Fatal("operations rows can be rewritten")
	}
}
