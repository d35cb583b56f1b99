package redisinventory_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
)

var evalshaUsec = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`)

// BenchmarkBatchedDeducts runs b.N deducts of new buyers on one SKU from
// 128 goroutines through RedisInventory, for each MaxBatch, on one Redis
// (appendfsync always): purchases/s, the mean batch, and the script time
// per purchase as Redis counts it (INFO commandstats, EVALSHA usec), which
// leaves out the event loop and the AOF's write and fsync.
//
//	go test -run '^$' -bench BatchedDeducts -benchtime 50000x ./internal/redis/redisinventory/
func BenchmarkBatchedDeducts(b *testing.B) {
	for _, maxBatch := range []int{1, 32, 128, 512} {
		b.Run(fmt.Sprint("max-batch=", maxBatch), func(b *testing.B) {
			f := newFixture(b)
			ctx := context.Background()
			var calls, attempts atomic.Int64
			inv := must(redisinventory.NewRedisInventory(f.client, f.keys, redisinventory.InventoryConfig{MaxBatch: maxBatch,
				ObserveBatch: func(n int) { calls.Add(1); attempts.Add(int64(n)) }}))
			sku := f.warm(b, "bench", domain.MaxQuantity, 1)
			f.client.ConfigResetStat(ctx)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range 128 {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						id := strconv.FormatInt(i, 10)
						if _, err := inv.Deduct(ctx, sku, must(domain.NewUserID("u"+id)), must(domain.NewQuantity(1)),
							must(domain.NewRequestID("r"+id)), uuid.NewString()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
			b.ReportMetric(float64(attempts.Load())/float64(max(calls.Load(), 1)), "attempts/call")
			if m := evalshaUsec.FindStringSubmatch(f.client.Info(ctx, "commandstats").Val()); m != nil {
				usec, _ := strconv.ParseFloat(m[2], 64)
				b.ReportMetric(usec/float64(b.N), "script-µs/purchase")
			}
		})
	}
}
