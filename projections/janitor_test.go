package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/projections"
)

func TestJanitorNeverTrimsPendingOrUndeliveredEntries(t *testing.T) {
	t.Parallel()
	srv := localstacktest.Redis(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	const stream = "inv:{p00}:events"
	var ids []string
	for i := range 10 {
		id, err := client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": i}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	j, err := projections.NewJanitor(projections.JanitorConfig{
		Client: client, Streams: []string{stream}, Retention: 0, Interval: time.Second,
		Logger: quiet, Metrics: projections.NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without a consumer group nobody has read anything: keep it all.
	if n, err := j.Trim(ctx, stream, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("trim without group: removed %d, err %v; want 0", n, err)
	}
	if err := client.XGroupCreate(ctx, stream, projections.ConsumerGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	read := func(consumer string, n int64) []string {
		res, err := client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: projections.ConsumerGroup, Consumer: consumer, Streams: []string{stream, ">"}, Count: n}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range res[0].Messages {
			got = append(got, m.ID)
		}
		return got
	}
	// Entries 0-1 acked, 2 pending on a stuck consumer, 3-5 acked, 6-9 undelivered.
	delivered := read("a", 6)
	client.XAck(ctx, stream, projections.ConsumerGroup, delivered[0], delivered[1], delivered[3], delivered[4], delivered[5])

	later := time.Now().Add(time.Hour) // everything is past the retention window
	n, err := j.Trim(ctx, stream, later)
	if err != nil || n != 2 {
		t.Fatalf("first trim removed %d (err %v), want the 2 acked entries below the pending one", n, err)
	}
	left, _ := client.XRange(ctx, stream, "-", "+").Result()
	if len(left) != 8 || left[0].ID != ids[2] {
		t.Fatalf("after trim the stream starts at %v with %d entries; want the pending entry %s first and 8 left", left[0].ID, len(left), ids[2])
	}

	client.XAck(ctx, stream, projections.ConsumerGroup, delivered[2])
	if n, err = j.Trim(ctx, stream, later); err != nil || n != 4 {
		t.Fatalf("second trim removed %d (err %v), want 4 acked entries, and none undelivered", n, err)
	}
	left, _ = client.XRange(ctx, stream, "-", "+").Result()
	if len(left) != 4 || left[0].ID != ids[6] {
		t.Fatalf("undelivered entries were trimmed: %d left, first %v", len(left), left)
	}

	// Within the retention window nothing is trimmed even when acked.
	rest := read("a", 10)
	client.XAck(ctx, stream, projections.ConsumerGroup, rest...)
	j2, _ := projections.NewJanitor(projections.JanitorConfig{Client: client, Streams: []string{stream}, Retention: time.Hour,
		Logger: quiet, Metrics: projections.NewMetrics(prometheus.NewRegistry())})
	if n, err = j2.Trim(ctx, stream, time.Now()); err != nil || n != 0 {
		t.Fatalf("trim inside retention removed %d (err %v)", n, err)
	}
}
