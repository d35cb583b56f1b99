package redisinventory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
)

// TestReconcileSourceReadsEveryEventOfAnEntry: the snapshot's tail and the
// gap re-projection take each event of an entry of several events (of two
// SKUs of one partition), leave out a malformed one but not its siblings,
// and TailLimit counts entries, not events.
func TestReconcileSourceReadsEveryEventOfAnEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.warm(t, "rec-multi-a", 10, 5)
	var b domain.SKUID
	for i := 0; b.String() == ""; i++ {
		if c := fmt.Sprint("rec-multi-b", i); f.keys.Partition(c) == f.keys.Partition(a.String()) {
			b = f.warm(t, c, 10, 5)
		}
	}
	const id = "0190b5a4-7a52-7c3e-9d1b-00000000000"
	e := fmt.Sprintf("%s1 deducted %s 2 1 9\n%s2 deducted %s 2 1 9\n%s3 deducted %s x 1 8\n%s4 deducted %s 3 1 8",
		id, a, id, b, id, a, id, a)
	if err := f.client.XAdd(ctx, &redis.XAddArgs{Stream: f.keys.SKUStreamKey(a.String()),
		Values: []any{"e", e, "user", "u1\nu2\nu3\nu4", "request_id", "r1\nr2\nr3\nr4"}}).Err(); err != nil {
		t.Fatal(err)
	}
	// Three entries (two warms and the batch) hold six events.
	src := must(redisinventory.NewRedisReconcileSource(f.client, f.keys, redisinventory.ReconcileSourceConfig{TailLimit: 3}))
	snap, err := src.Snapshot(ctx, []domain.SKUID{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []string
	for _, ev := range snap.InFlight {
		seqs = append(seqs, fmt.Sprint(ev.SKU, "/", ev.Seq))
	}
	if snap.SKUs[a].TailTruncated || len(seqs) != 5 {
		t.Fatalf("in flight %v (truncated %v), want the two stocks and a/2, b/2, a/3", seqs, snap.SKUs[a].TailTruncated)
	}
	got, err := src.StreamEvents(ctx, a, []int64{2, 3})
	if err != nil || len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 || got[1].User != "u4" {
		t.Fatalf("stream events %+v %v, want a's seqs 2 and 3", got, err)
	}
}
