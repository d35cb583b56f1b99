package reconcile

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// notifierRecord remembers what a Notifier was told, in order.
type notifierRecord struct{ got []string }

func (n *notifierRecord) Alert(_ context.Context, f Finding) { n.got = append(n.got, "finding "+f.SKU) }
func (n *notifierRecord) DeadLetter(_ context.Context, _, streamID, _ string) {
	n.got = append(n.got, "dead letter "+streamID)
}
func (n *notifierRecord) Fenced(_ context.Context, _ int) { n.got = append(n.got, "fenced") }
func (n *notifierRecord) UnsafeRedis(_ context.Context, _ string) {
	n.got = append(n.got, "unsafe redis")
}
func (n *notifierRecord) SafeRedis(_ context.Context) { n.got = append(n.got, "safe redis") }

func TestLogAlerterLogsEveryAlertAndPassesItOn(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	next := &notifierRecord{}
	a := NewLogAlerter(slog.New(slog.NewTextHandler(&logs, nil)), next)
	a.Alert(ctx, Finding{SKU: "a", Class: ClassRedisHigh})
	a.DeadLetter(ctx, "inv:{p01}:events", "1-1", "missing seq")
	a.Fenced(ctx, 3)
	if got := strings.Join(next.got, ", "); got != "finding a, dead letter 1-1, fenced" {
		t.Fatalf("passed on: %s", got)
	}
	for _, want := range []string{"reconciliation finding", "sku=a", "stream entry sent to dead_letters", "stream_id=1-1",
		"skus still fenced", "count=3"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Count(logs.String(), "level=ERROR") != 3 {
		t.Errorf("want 3 ERROR lines:\n%s", logs.String())
	}
	// Without a notifier it only logs.
	NewLogAlerter(slog.New(slog.NewTextHandler(&logs, nil)), nil).Fenced(ctx, 1)
}

// TestFindingLogLineShowsValues: the figures Redis may lack are logged as
// numbers, or "absent", never as memory addresses.
func TestFindingLogLineShowsValues(t *testing.T) {
	var logs bytes.Buffer
	a := NewLogAlerter(slog.New(slog.NewTextHandler(&logs, nil)), nil)
	stock, seq := int64(12), int64(40)
	a.Alert(context.Background(), Finding{SKU: "a", Class: ClassRedisLow, Before: Figures{RedisStock: &stock, RedisSeq: &seq, LedgerStock: 14}})
	a.Alert(context.Background(), Finding{SKU: "b", Class: ClassRedisMissing})
	out := logs.String()
	for _, want := range []string{"redis_stock=12 redis_seq=40 ledger_stock=14", "redis_stock=absent redis_seq=absent"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "0xc") {
		t.Fatalf("log shows an address:\n%s", out)
	}
}
