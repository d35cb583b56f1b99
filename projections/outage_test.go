package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestPostgresOutageLosesNothing stops PostgreSQL (immediate mode, like a
// crash) for about 10 s in the middle of a sale, then starts it again.
func TestPostgresOutageLosesNothing(t *testing.T) {
	s := stacktest.New(t, stacktest.WithPrivatePostgres())
	const sku = "outage-sku"
	s.SKU(t, sku, 2500, 1)
	s.RunProjector(t)

	saleDone := make(chan struct{})
	go func() {
		defer close(saleDone)
		sale(t, s, sku, 1500, 1500)
		time.Sleep(2 * time.Second)
		sale(t, s, sku, 3000, 3000) // continues while PostgreSQL is down
	}()
	localstacktest.WaitFor(t, "projection before the outage", 30*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) > 100 })
	ctx := context.Background()
	if err := s.Postgres.StopImmediate(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if err := s.Postgres.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-saleDone
	want := streamLen(t, s, sku)
	localstacktest.WaitFor(t, "backlog to drain after the outage", 90*time.Second, func() bool { return ledgerCount(t, s.Pool, sku) == want })
	assertLedgerEqualsStream(t, s, sku)
}
