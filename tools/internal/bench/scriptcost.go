package bench

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Redis's own view of a script: its usec_per_call from INFO commandstats,
// and the AOF bytes each call adds (aof_current_size before and after),
// both measured around one redis-benchmark run that sends nothing but the
// script's EVALSHA.

// seedLikeSource is the seed's purchase script plus one XADD; the lab note
// docs/benchmarks/2026-11-30-purchase-script-cost.md prints it.
//
//go:embed seedlike.lua
var seedLikeSource string

var seedLikeScript = redis.NewScript(seedLikeSource)

const (
	seedLikeLabel        = "seed-like"
	seedLikeSoldOutLabel = "seed-like-sold-out"
)

// scriptCost is what Redis counted while one script ran alone.
type scriptCost struct {
	aofBefore int64
}

var (
	evalshaStats = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=\d+,usec_per_call=([0-9.]+)`)
	aofSize      = regexp.MustCompile(`aof_current_size:(\d+)`)
)

// startScriptCost resets Redis's command statistics and notes the AOF's size.
func startScriptCost(ctx context.Context, rdb redis.UniversalClient) (*scriptCost, error) {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	size, err := aofCurrentSize(ctx, rdb)
	if err != nil {
		return nil, err
	}
	return &scriptCost{aofBefore: size}, nil
}

// finish records the script's usec_per_call and AOF bytes per call in rep.
func (c *scriptCost) finish(ctx context.Context, rdb redis.UniversalClient, rep *Report) error {
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return fmt.Errorf("INFO commandstats: %w", err)
	}
	m := evalshaStats.FindStringSubmatch(stats)
	if m == nil {
		return fmt.Errorf("INFO commandstats has no EVALSHA line")
	}
	calls, _ := strconv.ParseInt(m[1], 10, 64)
	rep.ScriptUsecPerCall, _ = strconv.ParseFloat(m[2], 64)
	size, err := aofCurrentSize(ctx, rdb)
	if err != nil {
		return err
	}
	if calls > 0 && size > c.aofBefore {
		rep.AOFBytesPerCall = float64(size-c.aofBefore) / float64(calls)
	}
	return nil
}

func aofCurrentSize(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO persistence: %w", err)
	}
	m := aofSize.FindStringSubmatch(info)
	if m == nil {
		return 0, fmt.Errorf("INFO persistence has no aof_current_size: is appendonly on?")
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// pauseAOFRewrites turns Redis's automatic AOF rewrite off until the
// returned function restores it: a rewrite in the middle of a run would
// shrink the AOF and spoil its bytes per call.
func pauseAOFRewrites(ctx context.Context, rdb redis.UniversalClient) (restore func() error, err error) {
	cfg, err := rdb.ConfigGet(ctx, "auto-aof-rewrite-percentage").Result()
	if err != nil {
		return nil, fmt.Errorf("CONFIG GET auto-aof-rewrite-percentage: %w", err)
	}
	if err := rdb.ConfigSet(ctx, "auto-aof-rewrite-percentage", "0").Err(); err != nil {
		return nil, fmt.Errorf("CONFIG SET auto-aof-rewrite-percentage: %w", err)
	}
	return func() error {
		return rdb.ConfigSet(context.WithoutCancel(ctx), "auto-aof-rewrite-percentage", cfg["auto-aof-rewrite-percentage"]).Err()
	}, nil
}

// seedLikeSale is the seed-like script's sale: its redis-benchmark
// command, and each SKU's stock key and stream.
type seedLikeSale struct {
	*rawScenario
	stockKeys, streams []string
}

// seedLikeScenario loads the seed-like script and a sale of stock units
// on each of skus SKUs, under keys of their own.
func seedLikeScenario(ctx context.Context, rdb redis.UniversalClient, stock int64, skus int) (*seedLikeSale, error) {
	if err := seedLikeScript.Load(ctx, rdb).Err(); err != nil {
		return nil, fmt.Errorf("load the seed-like script: %w", err)
	}
	s := &seedLikeSale{rawScenario: &rawScenario{sku: "seed-like"}}
	tag := func(i int) string { return "bench:{seed-like-" + strconv.Itoa(i) + "}:" }
	if skus == 1 {
		// The keys the script names itself for --skus, passed as KEYS.
		tag = func(int) string { return "bench:{seed-like}:" }
	}
	for i := range skus {
		t := tag(i)
		s.stockKeys, s.streams = append(s.stockKeys, t+"stock"), append(s.streams, t+"events")
		s.bulky = append(s.bulky, t+"stock", t+"buyers", t+"events")
	}
	if err := rdb.Del(ctx, s.bulky...).Err(); err != nil {
		return nil, err
	}
	for _, k := range s.stockKeys {
		if err := rdb.Set(ctx, k, stock, 0).Err(); err != nil {
			return nil, err
		}
	}
	s.skuKey, s.benchStream = s.stockKeys[0], s.streams[0]
	if skus == 1 {
		s.args = []string{"EVALSHA", seedLikeScript.Hash(), "3", s.skuKey, tag(0) + "buyers", s.benchStream, "seed-like", "u__rand_int__", "1"}
	} else {
		s.args = []string{"EVALSHA", seedLikeScript.Hash(), "0", "seed-like", "u__rand_int__", "1", strconv.Itoa(skus)}
	}
	return s, nil
}

// runSeedLikeSoldOut runs the seed-like script for n calls on SKUs with
// no stock: every call is a refusal, for Redis's CPU per refusal.
func (c *comparison) runSeedLikeSoldOut(ctx context.Context, n int, cpu *cpuSampler) (Report, error) {
	s, err := seedLikeScenario(ctx, c.rdb, 0, c.cfg.SKUs)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = s.cleanup(ctx, c.rdb) }()
	rep, res, err := c.measureScript(ctx, s.rawScenario, seedLikeSoldOutLabel, 0, n, cpu)
	if err != nil {
		return rep, err
	}
	rep.SKUs = c.cfg.SKUs
	rep.Outcomes["sold_out"] = res.requests
	rep.SoldOutPhase = &PhaseReport{Attempts: res.requests, Seconds: res.seconds, Throughput: res.rps, P50: res.p50, P99: res.p99}
	return rep, nil
}

// runSeedLike runs the seed-like ceiling for n calls and checks in Redis
// that every call that deducted appended its event.
func (c *comparison) runSeedLike(ctx context.Context, n int, cpu *cpuSampler) (Report, error) {
	s, err := seedLikeScenario(ctx, c.rdb, rawCeilingStock, c.cfg.SKUs)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = s.cleanup(ctx, c.rdb) }()
	rep, res, err := c.measureScript(ctx, s.rawScenario, seedLikeLabel, rawCeilingStock, n, cpu)
	if err != nil {
		return rep, err
	}
	rep.SKUs = c.cfg.SKUs
	var events int64
	for i, k := range s.stockKeys {
		left, err := c.rdb.Get(ctx, k).Int64()
		if err != nil {
			return rep, err
		}
		grew, err := c.rdb.XLen(ctx, s.streams[i]).Result()
		if err != nil {
			return rep, err
		}
		rep.Sold += rawCeilingStock - left
		events += grew
	}
	rep.SoldByTarget = rep.Sold
	rep.Outcomes["sold"] = rep.Sold
	if rest := res.requests - rep.Sold; rest > 0 {
		rep.Outcomes["already_purchased"] = rest
	}
	rep.SuccessPath = &PhaseReport{Attempts: res.requests, Seconds: res.seconds, Throughput: res.rps, P50: res.p50, P99: res.p99}
	if events != rep.Sold || rep.Sold < res.requests*99/100 {
		return rep, fmt.Errorf("%s: %d of %d calls deducted and the stream grew %d: the script did not run as written", seedLikeLabel, rep.Sold, res.requests, events)
	}
	return rep, nil
}
