package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

func TestLedgerIsAppendOnly(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	ev := domain.Event{ID: uuid.NewString(), Type: domain.EventStocked, SKU: "guard", Seq: 1, Qty: 5, Delta: 5, Balance: 5,
		OccurredAt: time.Now(), StreamID: "1-1"}
	if _, err := s.Projection.AppendBatch(ctx, []domain.Event{ev}); err != nil {
		t.Fatal(err)
	}
	inserted, err := s.Projection.AppendBatch(ctx, []domain.Event{ev})
	if err != nil || len(inserted) != 0 {
		t.Fatalf("duplicate event_id insert: inserted %v err %v, want a no-op", inserted, err)
	}
	var rows, balance int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), (SELECT balance FROM balances WHERE sku='guard') FROM ledger_entries`).Scan(&rows, &balance); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || balance != 5 {
		t.Fatalf("after duplicate insert: %d rows, balance %d; want 1 and 5", rows, balance)
	}

	for _, role := range []string{"origin", "replica"} {
		for _, stmt := range []string{
			`UPDATE ledger_entries SET delta = 500`,
			`DELETE FROM ledger_entries`,
			`TRUNCATE ledger_entries`,
		} {
			t.Run(role+" "+stmt, func(t *testing.T) {
				conn, err := s.Pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Release()
				if _, err := conn.Exec(ctx, `SET session_replication_role = `+role); err != nil {
					t.Fatal(err)
				}
				defer conn.Exec(ctx, `RESET session_replication_role`) //nolint:errcheck // best effort on a test connection
				if _, err := conn.Exec(ctx, stmt); err == nil {
					t.Fatalf("%s succeeded on the append-only ledger", stmt)
				}
			})
		}
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE delta = 5`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("ledger row changed: %d rows with delta 5, err %v", rows, err)
	}
}
