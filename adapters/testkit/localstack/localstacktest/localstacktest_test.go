package localstacktest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

func TestPostgresGivesFreshDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url1 := localstacktest.Postgres(t)
	url2 := localstacktest.Postgres(t)
	if url1 == url2 {
		t.Fatalf("two calls returned the same database %q", url1)
	}

	c1, err := pgx.Connect(ctx, url1)
	if err != nil {
		t.Fatalf("connect %s: %v", url1, err)
	}
	defer c1.Close(ctx)
	if _, err := c1.Exec(ctx, "CREATE TABLE only_in_one (x int)"); err != nil {
		t.Fatal(err)
	}

	c2, err := pgx.Connect(ctx, url2)
	if err != nil {
		t.Fatalf("connect %s: %v", url2, err)
	}
	defer c2.Close(ctx)
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("second database has %d tables, want a fresh one", n)
	}
}

func TestRedisAppliesOptions(t *testing.T) {
	t.Parallel()
	srv := localstacktest.Redis(t, func(c *localstack.RedisConfig) { c.AppendFsync = "everysec" })
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()
	got, err := client.ConfigGet(context.Background(), "appendfsync").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got["appendfsync"] != "everysec" {
		t.Fatalf("appendfsync = %q, want everysec", got["appendfsync"])
	}
	if got, _ := client.ConfigGet(context.Background(), "appendonly").Result(); got["appendonly"] != "yes" {
		t.Fatalf("appendonly = %q, want yes", got["appendonly"])
	}
}
