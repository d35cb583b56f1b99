package localstack_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// TestRedisClusterServesEverySlotAndRestartsInPlace: a key on each master
// is written, its master killed and restarted in place, and the key is
// still there (AOF) once the cluster is healthy again.
func TestRedisClusterServesEverySlotAndRestartsInPlace(t *testing.T) {
	start := time.Now()
	c := localstacktest.RedisCluster(t)
	t.Logf("3-master cluster ready in %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer client.Close()
	masters := map[string]string{}
	for _, k := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}", "{h}"} {
		if err := client.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
		m, err := c.MasterFor(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()] = k
	}
	if len(masters) != 3 {
		t.Fatalf("8 keys landed on %d masters, want 3: %v", len(masters), masters)
	}
	node, _ := c.MasterFor(ctx, "{a}")
	if err := node.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := node.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := client.Get(ctx, "{a}").Result(); err != nil || got != "v" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
}
