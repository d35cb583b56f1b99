package eventtail_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/eventtail"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

var errEnough = errors.New("enough")

// BenchmarkFollow measures how fast a tail reads a SKU's partition stream:
// b.N entries are appended first, then Follow reads them from the start,
// one XREAD per entry as watermill-redisstream's fan-out mode does.
func BenchmarkFollow(b *testing.B) {
	srv := localstacktest.Redis(b)
	ctx := context.Background()
	keys, err := redisinventory.NewKeyspace(redisinventory.DefaultPartitions)
	if err != nil {
		b.Fatal(err)
	}
	const sku = "tail-bench"
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	pipe := client.Pipeline()
	for i := range b.N {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: keys.SKUStreamKey(sku), Values: []any{
			"e", fmt.Sprintf("00000000-0000-7000-8000-%012d deducted %s %d 1 %d", i, sku, i+1, 1_000_000-i),
			"user", fmt.Sprint("u", i), "request_id", fmt.Sprint("r", i)}})
		if pipe.Len() == 1000 || i == b.N-1 {
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	start := time.Now()
	n := 0
	err = eventtail.Follow(ctx, eventtail.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr()}), Keys: keys, SKU: sku, FromStart: true},
		func(domain.Event) error {
			if n++; n == b.N {
				return errEnough
			}
			return nil
		})
	if !errors.Is(err, errEnough) {
		b.Fatalf("follow: %v after %d events", err, n)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
