package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Values of Config.RedisConfig.
const (
	// RedisConfigCheck reads every master's persistence settings with
	// CONFIG GET.
	RedisConfigCheck = "check"
	// RedisConfigAssume skips CONFIG GET, which managed Redis services
	// (ElastiCache, Memorystore) disable: the operator asserts that Redis
	// persists as --durability needs. The eviction policy is still read,
	// from INFO memory.
	RedisConfigAssume = "assume"
)

// safetyPolicy is what the Redis settings must allow.
type safetyPolicy struct {
	// mode is the durability mode, app.DurabilityStrict or app.DurabilityEverysec.
	mode string
	// allowVolatile accepts persistence off.
	allowVolatile bool
	// assume skips reading the persistence settings (RedisConfigAssume).
	assume bool
}

// checkDurability refuses a Redis whose persistence or eviction settings
// cannot keep the promises of the chosen mode: strict needs every write
// fsynced before it is answered, and no mode survives Redis evicting a
// receipt (a retry would then buy again).
func checkDurability(ctx context.Context, client redis.UniversalClient, p safetyPolicy, log *slog.Logger) error {
	volatile, unreachable, err := redisSafety(ctx, client, p)
	if err != nil {
		return err
	}
	if len(unreachable) > 0 {
		log.Warn("redis masters unreachable at start: their SKUs answer 503 until they are back, and their settings are checked then",
			"masters", unreachable)
	}
	if volatile {
		log.Warn("running with Redis persistence off: a Redis restart loses acknowledged sales until restore-redis")
	}
	if p.assume {
		log.Warn("Redis persistence settings assumed, not read (--redis-config=assume): the operator asserts that every master persists as --durability needs",
			"durability", p.mode)
	}
	return nil
}

// redisSafety reads the persistence and eviction settings of every Redis
// master, as the cluster's current topology names them. An unsafe setting
// is an error wrapping domain.ErrUnsafeRedis that says how to fix it; any
// other error means the settings could not be read. volatile reports
// persistence off, accepted because allowVolatile is set. In a cluster, a
// master that cannot be reached is listed in unreachable rather than
// failing the check: its SKUs answer 503 on their own, and its settings are
// read once it answers.
func redisSafety(ctx context.Context, client redis.UniversalClient, p safetyPolicy) (volatile bool, unreachable []string, err error) {
	switch c := client.(type) {
	case *redis.Client:
		volatile, err = nodeSafety(ctx, c, p)
		return volatile, nil, err
	case *redis.ClusterClient:
		var (
			mu   sync.Mutex
			errs []error
		)
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			v, err := nodeSafety(ctx, node, p)
			mu.Lock()
			defer mu.Unlock()
			volatile = volatile || v
			if err != nil && !errors.Is(err, domain.ErrUnsafeRedis) && redisinventory.Unavailable(err) {
				unreachable = append(unreachable, node.Options().Addr)
				return nil
			}
			errs = append(errs, err)
			return nil
		})
		return volatile, unreachable, errors.Join(append(errs, err)...)
	}
	return false, nil, fmt.Errorf("unsupported redis client %T", client)
}

func nodeSafety(ctx context.Context, node *redis.Client, p safetyPolicy) (volatile bool, err error) {
	addr := node.Options().Addr
	info, err := node.Info(ctx, "memory").Result()
	if err != nil {
		return false, fmt.Errorf("read the Redis eviction policy of %s (INFO memory): %w", addr, err)
	}
	if err := evictionSafety(addr, info); err != nil {
		return false, err
	}
	if p.assume {
		return false, nil
	}
	cfg, err := node.ConfigGet(ctx, "append*").Result()
	if err != nil {
		if !redisinventory.Unavailable(err) {
			return false, fmt.Errorf("%w: cannot read the persistence settings of redis %s (CONFIG GET: %w). "+
				"A managed Redis (ElastiCache, Memorystore) disables CONFIG: pass --redis-config=assume "+
				"(INVLEDGER_REDIS_CONFIG) to assert that it persists as --durability %s needs", domain.ErrUnsafeRedis, addr, err, p.mode)
		}
		return false, fmt.Errorf("read the persistence settings of redis %s (CONFIG GET): %w", addr, err)
	}
	mode, allowVolatile := p.mode, p.allowVolatile
	appendOnly, fsync := cfg["appendonly"], cfg["appendfsync"]
	switch {
	case appendOnly != "yes":
		if !allowVolatile {
			return false, fmt.Errorf("%w: redis %s persistence is off (appendonly no): a restart would lose acknowledged sales. "+
				"Set `appendonly yes` and `appendfsync always` in redis.conf, or pass --allow-volatile-redis to accept the risk",
				domain.ErrUnsafeRedis, addr)
		}
		volatile = true
	case mode == app.DurabilityStrict && fsync != "always":
		return false, fmt.Errorf("%w: durability strict needs Redis `appendfsync always`, but redis %s has %q: "+
			"run CONFIG SET appendfsync always, or use --durability everysec", domain.ErrUnsafeRedis, addr, fsync)
	case mode == app.DurabilityEverysec && fsync != "always" && fsync != "everysec":
		return false, fmt.Errorf("%w: durability everysec needs Redis appendfsync everysec or always, but redis %s has %q",
			domain.ErrUnsafeRedis, addr, fsync)
	}
	return volatile, nil
}

// evictionSafety refuses every eviction policy but noeviction, as INFO
// memory of the node at addr reports it: INFO needs no CONFIG, so it is
// read in every --redis-config mode. A volatile-* policy is refused too,
// whatever the keys are at the moment: receipts and buyers carry no TTL,
// but order records and the refusal counts do, and such a policy would
// evict them under memory pressure, before their time.
func evictionSafety(addr, info string) error {
	policy := evictionPolicy(info)
	if policy == "noeviction" {
		return nil
	}
	return fmt.Errorf("%w: redis %s has maxmemory-policy %q: under memory pressure Redis may evict keys "+
		"invledger needs (with allkeys-*: receipts and buyers, and a retry would then buy again; with volatile-*: "+
		"order records and refusal counts). Run CONFIG SET maxmemory-policy noeviction "+
		"and set `maxmemory-policy noeviction` in redis.conf", domain.ErrUnsafeRedis, addr, policy)
}

// evictionPolicy reads maxmemory_policy from INFO memory.
func evictionPolicy(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			return v
		}
	}
	return ""
}

// salesStopper is the inventory whose sales a safety watcher stops.
type salesStopper interface {
	StopSales(reason error)
	ResumeSales()
}

// safetyWatcher re-reads Redis's persistence and eviction settings every
// interval while serving. When they become unsafe it stops sales (the
// inventory answers domain.ErrUnsafeRedis, one atomic load per call) and
// alerts; when they are safe again sales resume. A Redis that does not
// answer changes nothing: purchases fail as unavailable on their own.
type safetyWatcher struct {
	client   redis.UniversalClient
	policy   safetyPolicy
	sales    salesStopper
	alerts   reconcile.UnsafeRedisAlerter
	interval time.Duration
	log      *slog.Logger
}

// run watches until ctx ends.
func (w safetyWatcher) run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	stopped := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		readCtx, cancel := context.WithTimeout(ctx, w.interval)
		_, _, err := redisSafety(readCtx, w.client, w.policy)
		cancel()
		switch {
		case errors.Is(err, domain.ErrUnsafeRedis):
			w.sales.StopSales(err) // the latest reason, alerted once
			if !stopped {
				w.alerts.UnsafeRedis(ctx, err.Error())
				stopped = true
			}
		case err != nil:
			if ctx.Err() == nil {
				w.log.Debug("read redis safety settings", "err", err)
			}
		case stopped:
			w.sales.ResumeSales()
			w.alerts.SafeRedis(ctx)
			stopped = false
		}
	}
}
