package stacktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// TestTheStackSellsAndProjects: the stack New builds sells through its
// Service, its projector carries every event of the stream into the
// ledger, the sealer seals them, and the ledger then equals Redis, as its
// reconciler confirms.
func TestTheStackSellsAndProjects(t *testing.T) {
	localstacktest.SkipShort(t)
	ctx := context.Background()
	st := stacktest.New(t)
	const sku = "stacktest-1"
	st.SKU(t, sku, 3, 1)
	st.RunProjector(t)

	for i, user := range []string{"u1", "u2", "u3"} {
		rc, err := st.Service.Deduct(ctx, ledger.MustDeductCommand(sku, user, 1, "r-"+user))
		if err != nil {
			t.Fatalf("deduct %s: %v", user, err)
		}
		if want := int64(2 - i); rc.Remaining != want {
			t.Errorf("%s: remaining %d, want %d", user, rc.Remaining, want)
		}
	}
	if _, err := st.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "u4", 1, "r-u4")); !errors.Is(err, domain.ErrSoldOut) {
		t.Errorf("a fourth unit of three: %v, want sold out", err)
	}
	if rc, err := st.Service.Deduct(ctx, ledger.MustDeductCommand(sku, "u1", 1, "r-u1")); err != nil || !rc.Replayed {
		t.Errorf("a retried request: %+v, %v, want the original receipt replayed", rc, err)
	}

	events := st.StreamEvents(t, sku)
	if len(events) != 4 { // stocked, then three deductions
		t.Fatalf("stream holds %d events of %s, want 4: %v", len(events), sku, events)
	}
	st.WaitProjected(t, sku, 30*time.Second)
	if pass := st.Seal(t); pass.Sealed[domain.SealSHA256]+pass.Sealed[domain.SealHMACSHA256] != 4 || len(pass.Waiting) != 0 {
		t.Errorf("seal pass %+v, want the 4 events sealed and none waiting", pass)
	}

	view, err := st.Service.State(ctx, sku)
	if err != nil {
		t.Fatal(err)
	}
	if view.RedisStock == nil || view.LedgerStock == nil || *view.RedisStock != 0 || *view.LedgerStock != 0 ||
		view.RedisSeq == nil || view.LedgerSeq == nil || *view.RedisSeq != 4 || *view.LedgerSeq != 4 {
		t.Errorf("state: redis stock %v seq %v, ledger stock %v seq %v; want 0 and 4 on both sides",
			deref(view.RedisStock), deref(view.RedisSeq), deref(view.LedgerStock), deref(view.LedgerSeq))
	}
	rep, err := st.App.Reconciler.Run(ctx, reconcile.Options{SKUs: []string{sku}, Trigger: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checked != 1 || len(rep.Drifts) != 0 || rep.Lagging != 0 {
		t.Errorf("reconciliation: checked %d, lagging %d, drifts %+v; want one SKU, in agreement", rep.Checked, rep.Lagging, rep.Drifts)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
