package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// TestClosingLeavesHoldsOpenAndArchivingWaitsForThem closes a SKU with a
// hold open: the hold can still be confirmed, no new one can begin, and
// archive-buyers refuses until no hold is open.
func TestClosingLeavesHoldsOpenAndArchivingWaitsForThem(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "arch-holds"
	s.SKU(t, sku, 10, 1)
	s.RunProjector(t)
	holds := s.App.Holds
	reserve := func(user string) (domain.Hold, error) {
		cmd, err := holds.NewReserveCommand(sku, user, 1, "req-"+user, nil)
		if err != nil {
			t.Fatal(err)
		}
		return holds.Reserve(ctx, cmd)
	}
	h, err := reserve("u1")
	if err != nil {
		t.Fatal(err)
	}
	arch := s.Archiver(t)
	if _, err := arch.CloseSKU(ctx, sku); err != nil {
		t.Fatal(err)
	}
	if _, err := reserve("u2"); !errors.Is(err, domain.ErrClosed) {
		t.Fatalf("reserve after close = %v, want closed", err)
	}
	s.WaitProjected(t, sku, 30*time.Second)
	if _, err := arch.ArchiveBuyers(ctx, sku); !errors.Is(err, ledger.ErrHoldsOpen) || !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("archive with a hold open = %v, want ErrHoldsOpen", err)
	}
	if len(s.Counts(t, sku)) == 0 {
		t.Fatal("a refused archive dropped the buyers")
	}
	ref, err := ledger.NewHoldRef(sku, h.HoldID)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := holds.Confirm(ctx, ref); err != nil || c.Status != domain.HoldConfirmed {
		t.Fatalf("confirm on a closed sku = %+v, %v", c, err)
	}
	s.WaitProjected(t, sku, 30*time.Second)
	res, err := arch.ArchiveBuyers(ctx, sku)
	if err != nil || res.Units != 1 || res.Buyers != 1 {
		t.Fatalf("archive once the hold ended = %+v, %v", res, err)
	}
}
