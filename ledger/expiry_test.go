package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

// TestHoldExpirySettlesMeasuresAndJournals runs the hold expiry over an
// order whose first line was confirmed on its own (as a confirm cut short
// leaves it), in everysec mode: once the other line's deadline passes, the
// expiry expires it and releases the confirmed line, with no caller. The
// hold calls are counted as deductions are, the expiry with its lateness,
// and the confirm, a sale, is journaled as a deduction is.
func TestHoldExpirySettlesMeasuresAndJournals(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t, stacktest.WithRedisConfig(func(c *localstack.RedisConfig) { c.AppendFsync = "everysec" }))
	o, confirmed := placeCutShort(t, s, "exp")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.App.HoldExpiry.Run(ctx, 50*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	id, _ := domain.NewOrderID("exp")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := s.App.Orders.Order(ctx, id)
		if err == nil && got.Status == domain.OrderExpired && got.Lines[0].Status == domain.HoldReleased {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order 10 s after its deadline: %+v, %v; want expired with line 0 released", got, err)
		}
	}
	assertUnsold(t, s, "after the expiry", "exp-a", "exp-b")

	ops := func(op, outcome string) float64 {
		return metric(t, s.App.Metrics.Registry, "invledger_inventory_operations_total", map[string]string{"operation": op, "outcome": outcome})
	}
	if r, c, rel := ops("reserve", "ok"), ops("confirm", "ok"), ops("release", "ok"); r != 2 || c != 1 || rel != 1 {
		t.Errorf("operations: reserve %v, confirm %v, release %v; want 2, 1, 1", r, c, rel)
	}
	if n := metric(t, s.App.Metrics.Registry, "invledger_holds_expired_total", nil); n != 1 {
		t.Errorf("holds expired = %v, want 1", n)
	}
	if n := metric(t, s.App.Metrics.Registry, "invledger_hold_expiry_lateness_seconds", nil); n != 1 {
		t.Errorf("expiry lateness observed %v times, want once", n)
	}
	if n := metric(t, s.App.Metrics.Registry, "invledger_redis_script_errors_total", map[string]string{"operation": "expire"}); n != 0 {
		t.Errorf("expire script errors = %v, want 0", n)
	}
	lost := s.App.Journal.TakeBeyond("exp-a", o.Lines[0].Seq)
	if len(lost) != 1 || lost[0].EventID != confirmed.EndEventID || lost[0].Seq != confirmed.EndSeq || lost[0].Qty != 2 ||
		lost[0].User != "buyer" {
		t.Fatalf("journal beyond the reserve = %+v; want the confirm %s at seq %d", lost, confirmed.EndEventID, confirmed.EndSeq)
	}
}

// metric returns the value of the counter, or the sample count of the
// histogram, name with labels; it fails the test if no series matches.
func metric(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue series
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s %v", name, labels)
	return 0
}
