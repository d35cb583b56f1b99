package redisbatch_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/projections/internal/redisbatch"
)

// BenchmarkDrain drains a backlog of b.N stream entries through a Watermill
// Router with a no-op handler, in one run: with this package's subscriber,
// and with watermill-redisstream's, read by one handler and by 4 consumers
// × 8 handlers (the projector's shape before it moved to redisbatch). The
// clock stops once every entry was handled and acked. The private Redis
// runs with appendfsync always, as in production. Run it at the size of
// interest, e.g.
//
//	go test -run '^$' -bench Drain -benchtime 60000x ./internal/redis/redisbatch
func BenchmarkDrain(b *testing.B) {
	srv := localstacktest.Redis(b)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	b.Cleanup(func() { _ = admin.Close() })
	newClient := func() redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 100})
		b.Cleanup(func() { _ = c.Close() })
		return c
	}
	wlog := watermill.NopLogger{}

	run := 0
	drain := func(b *testing.B, subscribe func(r *message.Router, stream string, handle message.NoPublishHandlerFunc)) {
		run++
		stream := fmt.Sprintf("drain-%d", run)
		fill(b, admin, stream, b.N)
		var handled atomic.Int64
		router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, wlog)
		if err != nil {
			b.Fatal(err)
		}
		subscribe(router, stream, func(*message.Message) error {
			handled.Add(1)
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ResetTimer()
		done := make(chan error, 1)
		go func() { done <- router.Run(ctx) }()
		deadline := time.Now().Add(5 * time.Minute)
		for handled.Load() < int64(b.N) || pending(b, admin, stream) > 0 {
			if time.Now().After(deadline) {
				b.Fatalf("drained %d of %d entries in 5 minutes", handled.Load(), b.N)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		<-router.Running() // a small backlog can be drained before every handler subscribed
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}

	b.Run("redisbatch", func(b *testing.B) {
		drain(b, func(r *message.Router, stream string, handle message.NoPublishHandlerFunc) {
			sub, err := redisbatch.NewSubscriber(redisbatch.SubscriberConfig{
				Client:        newClient(),
				ConsumerGroup: group,
				Consumer:      "c",
				Unmarshaller:  rawUnmarshaller{},
				Logger:        quiet,
			})
			if err != nil {
				b.Fatal(err)
			}
			r.AddConsumerHandler("drain", stream, sub, handle)
		})
	})
	for _, shape := range []struct{ consumers, readers int }{{1, 1}, {4, 8}} {
		b.Run(fmt.Sprintf("redisstream-%dx%d", shape.consumers, shape.readers), func(b *testing.B) {
			drain(b, func(r *message.Router, stream string, handle message.NoPublishHandlerFunc) {
				for c := range shape.consumers {
					sub, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{
						Client:                        newClient(),
						Unmarshaller:                  rawUnmarshaller{},
						Consumer:                      fmt.Sprintf("c%d", c),
						ConsumerGroup:                 group,
						OldestId:                      "0",
						DisableIndefiniteInitialBlock: true,
						BlockTime:                     time.Second,
					}, wlog)
					if err != nil {
						b.Fatal(err)
					}
					for i := range shape.readers {
						r.AddConsumerHandler(fmt.Sprintf("drain %d/%d", c, i), stream, sub, handle)
					}
				}
			})
		})
	}
}

// fill appends n entries to stream in pipelines of 10,000.
func fill(b *testing.B, c *redis.Client, stream string, n int) {
	b.Helper()
	ctx := context.Background()
	for n > 0 {
		pipe := c.Pipeline()
		for range min(n, 10_000) {
			pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"sku": "hot", "qty": 1}})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		n -= 10_000
	}
}

// pending is the number of entries delivered to the group and not acked.
func pending(b *testing.B, c *redis.Client, stream string) int64 {
	b.Helper()
	p, err := c.XPending(context.Background(), stream, group).Result()
	if err != nil {
		b.Fatal(err)
	}
	return p.Count
}
