package redisinventory_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
)

// BenchmarkDeductAcrossMasters runs purchases (the real script, appendfsync
// always) from 64 goroutines on one 3-master Redis Cluster, over three SKUs
// held by one master, then over three SKUs held by one master each: the
// same run, the same machine, so the ratio is what spreading SKUs buys.
func BenchmarkDeductAcrossMasters(b *testing.B) {
	cluster := localstacktest.RedisCluster(b)
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs(), PoolSize: 128})
	b.Cleanup(func() { _ = client.Close() })
	keys := must(redisinventory.NewKeyspace(redisinventory.DefaultPartitions))
	inv := must(redisinventory.NewRedisInventory(client, keys, redisinventory.InventoryConfig{}))
	ctx := context.Background()
	byMaster := map[string][]string{}
	for i := 0; i < 200; i++ {
		sku := fmt.Sprintf("bench-%d", i)
		m, err := client.MasterForKey(ctx, keys.SKUKey(sku))
		if err != nil {
			b.Fatal(err)
		}
		byMaster[m.Options().Addr] = append(byMaster[m.Options().Addr], sku)
	}
	var oneMaster, threeMasters []string
	for _, skus := range byMaster {
		if len(skus) < 3 {
			b.Fatal("too few SKUs per master")
		}
		if oneMaster == nil {
			oneMaster = skus[:3]
		}
		threeMasters = append(threeMasters, skus[len(skus)-1])
	}
	for _, sku := range append(oneMaster, threeMasters...) {
		def := must(domain.NewSKUDefinition(must(domain.NewSKUID(sku)), 100_000_000, 1))
		if _, _, err := inv.Warm(ctx, def, uuid.NewString()); err != nil {
			b.Fatal(err)
		}
		// Verified under the current run, as the reconciler leaves a SKU.
		if _, err := must(redisinventory.NewRedisReconcileSource(client, keys, redisinventory.ReconcileSourceConfig{})).
			StampMany(ctx, []domain.SKUID{must(domain.NewSKUID(sku))}, []int64{1}); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	for _, tc := range []struct {
		name string
		skus []string
	}{{"1-master", oneMaster}, {"3-masters", threeMasters}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					sku := must(domain.NewSKUID(tc.skus[i%int64(len(tc.skus))]))
					user := must(domain.NewUserID(fmt.Sprint("u", i)))
					req := must(domain.NewRequestID(fmt.Sprint("r", i)))
					if _, err := inv.Deduct(ctx, sku, user, must(domain.NewQuantity(1)), req, uuid.NewString()); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "purchases/s")
		})
	}
}
