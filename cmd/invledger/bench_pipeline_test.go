package main

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/runtime/app"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/cmd/invledger/internal/bench"
	"github.com/invledger/invledger/domain"
)

// BenchmarkDeductScriptPipelining runs the service's own deduct script (the
// EVALSHA a purchase sends, captured as bench --compare captures it) from
// 25 × GOMAXPROCS goroutines, once over the plain go-redis client (as
// redisinventory does over a Redis Cluster) and once through
// go-redis's (experimental) deferred auto-pipeliner, which coalesces
// concurrent calls into pipelines, as redisinventory does by default. It
// measures what coalescing gives the purchase path. Redis runs with
// appendfsync everysec, so the disk's fsync latency, which varies a lot on
// a VM, does not drown the difference in CPU and system calls:
//
//	go test -run '^$' -bench DeductScriptPipelining -benchtime 100000x ./cmd/invledger/
func BenchmarkDeductScriptPipelining(b *testing.B) { benchDeductScriptPipelining(b, "everysec") }

// BenchmarkDeductScriptPipeliningStrict is BenchmarkDeductScriptPipelining
// with appendfsync always, serve's default (--durability strict): there
// Redis fsyncs the AOF before it answers a batch of commands, so
// coalescing calls also coalesces fsyncs.
func BenchmarkDeductScriptPipeliningStrict(b *testing.B) { benchDeductScriptPipelining(b, "always") }

func benchDeductScriptPipelining(b *testing.B, appendFsync string) {
	ctx := context.Background()
	srv := localstacktest.Redis(b, func(c *localstack.RedisConfig) { c.AppendFsync = appendFsync })
	dbURL := localstacktest.Postgres(b)
	if err := app.Migrate(ctx, dbURL, quietLogger()); err != nil {
		b.Fatal(err)
	}
	cfg := Config{RedisURL: srv.URL(), DatabaseURL: dbURL, LogLevel: "error"}
	cfg.setDefaults()
	a, err := app.New(ctx, cfg.appConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	site, err := benchSite{cfg: cfg}.open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer site.Close()
	call, err := bench.DeductScriptCall(ctx, site, "pipe-"+strconv.FormatInt(time.Now().UnixNano(), 36), domain.MaxQuantity)
	if err != nil {
		b.Fatal(err)
	}
	sha := call[1]
	nk, _ := strconv.Atoi(call[2])
	keys, argv := call[3:3+nk], call[3+nk:]
	plain, ok := a.Redis.(*redis.Client)
	if !ok {
		b.Fatalf("redis client is %T", a.Redis)
	}
	auto, err := plain.AsyncAutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	for _, bc := range []struct {
		name string
		sc   redis.Scripter
	}{{"plain", plain}, {"autopipeline", auto}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(25)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				args := make([]any, len(argv))
				for pb.Next() {
					id := strconv.FormatInt(n.Add(1), 10)
					for j, v := range argv {
						args[j] = strings.ReplaceAll(v, "__rand_int__", id)
					}
					reply, err := bc.sc.EvalSha(ctx, sha, keys, args...).Slice()
					if err != nil {
						b.Error(err)
						return
					}
					if code, _ := reply[0].(int64); code != 1 {
						b.Errorf("deduct script answered %v, want a deduction", reply)
						return
					}
				}
			})
		})
	}
}
