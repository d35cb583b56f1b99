package app

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
)

// Redis topologies, as RedisTopology names them.
const (
	TopologySingle   = "single"
	TopologyCluster  = "cluster"
	TopologySentinel = "sentinel"
)

// RedisTopology is the kind of deployment cfg's Redis settings name:
// sentinel when RedisSentinels is set, cluster when RedisCluster is,
// single otherwise.
func (c Config) RedisTopology() string {
	switch {
	case len(c.RedisSentinels) > 0:
		return TopologySentinel
	case len(c.RedisCluster) > 0:
		return TopologyCluster
	}
	return TopologySingle
}

// isURL tells a URL from a bare host:port address.
func isURL(s string) bool { return strings.Contains(s, "://") }

// clusterOptions parses RedisCluster: bare seed addresses, or one cluster
// URL (redis:// or rediss://) with credentials, TLS and more seeds in
// ?addr= parameters, as go-redis's ParseClusterURL reads it.
func (c Config) clusterOptions() (*redis.ClusterOptions, error) {
	const field = "--redis-cluster (INVLEDGER_REDIS_CLUSTER)"
	if len(c.RedisCluster) == 1 && isURL(c.RedisCluster[0]) {
		opts, err := redis.ParseClusterURL(c.RedisCluster[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, hideURL(c.RedisCluster[0], err))
		}
		return opts, nil
	}
	if err := bareAddrs(field, c.RedisCluster); err != nil {
		return nil, err
	}
	return &redis.ClusterOptions{Addrs: c.RedisCluster}, nil
}

// failoverOptions parses the Sentinel settings: RedisSentinels as bare
// Sentinel addresses with RedisSentinelMaster naming the master, and the
// master's user, password, TLS and database taken from RedisURL; or
// RedisSentinels as one failover URL (go-redis's ParseFailoverURL) whose
// master_name parameter RedisSentinelMaster may replace, and whose user
// and password serve the master too unless RedisURL has a password.
func (c Config) failoverOptions() (*redis.FailoverOptions, error) {
	const field = "--redis-sentinels (INVLEDGER_REDIS_SENTINELS)"
	if len(c.RedisSentinels) == 1 && isURL(c.RedisSentinels[0]) {
		opts, err := redis.ParseFailoverURL(c.RedisSentinels[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, hideURL(c.RedisSentinels[0], err))
		}
		if c.RedisSentinelMaster != "" {
			opts.MasterName = c.RedisSentinelMaster
		}
		// The URL's user and password are the Sentinels'; the master's are
		// the same unless --redis-url gives its own.
		opts.Username, opts.Password = opts.SentinelUsername, opts.SentinelPassword
		if master, err := redis.ParseURL(c.redisURL()); err == nil && master.Password != "" {
			opts.Username, opts.Password = master.Username, master.Password
		}
		if opts.MasterName == "" {
			return nil, fmt.Errorf("%s: the failover URL needs ?master_name=, or set --redis-sentinel-master (INVLEDGER_REDIS_SENTINEL_MASTER)", field)
		}
		return opts, nil
	}
	var errs []error
	errs = append(errs, bareAddrs(field, c.RedisSentinels))
	if c.RedisSentinelMaster == "" {
		errs = append(errs, errors.New("--redis-sentinel-master (INVLEDGER_REDIS_SENTINEL_MASTER) is required with --redis-sentinels: the name the Sentinels monitor the master under"))
	}
	master, err := redis.ParseURL(c.redisURL())
	if err != nil {
		errs = append(errs, fmt.Errorf("--redis-url (INVLEDGER_REDIS_URL), which gives the Sentinel master's credentials: %w", hideURL(c.redisURL(), err)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &redis.FailoverOptions{MasterName: c.RedisSentinelMaster, SentinelAddrs: c.RedisSentinels,
		Username: master.Username, Password: master.Password, DB: master.DB, TLSConfig: master.TLSConfig}, nil
}

func (c Config) redisURL() string {
	if c.RedisURL == "" {
		return defaultRedisURL
	}
	return c.RedisURL
}

// defaultRedisURL is Config.RedisURL's default.
const defaultRedisURL = "redis://127.0.0.1:6379/0"

// bareAddrs checks that every entry is a host:port address: a URL among
// several entries is refused, since only a single URL is read as one.
func bareAddrs(field string, addrs []string) error {
	var errs []error
	for _, a := range addrs {
		if isURL(a) {
			errs = append(errs, fmt.Errorf("%s: give either host:port addresses or one URL, not a URL among addresses", field))
			continue
		}
		if strings.Contains(a, "@") {
			errs = append(errs, fmt.Errorf("%s: an entry is not a host:port address (not shown: it may hold a password); "+
				"give credentials in one URL: redis[s]://user:password@host:port?addr=host2:port2", field))
			continue
		}
		if i := strings.LastIndexByte(a, ':'); i <= 0 || i == len(a)-1 {
			errs = append(errs, fmt.Errorf("%s: %q is not a host:port address", field, a))
		}
	}
	return errors.Join(errs...)
}

// hideURL keeps a parse error of raw from quoting its password: net/url's
// errors repeat the whole input, and go-redis's some parts of it.
func hideURL(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = fmt.Errorf("not a valid URL: %w", ue.Err)
	}
	if i := strings.LastIndexByte(raw, '@'); i >= 0 {
		userinfo := raw[:i]
		if j := strings.Index(userinfo, "//"); j >= 0 {
			userinfo = userinfo[j+2:]
		}
		msg := err.Error()
		_, first, _ := strings.Cut(userinfo, ":")
		last := userinfo[strings.LastIndexByte(userinfo, ':')+1:]
		if strings.Contains(msg, "@") || (first != "" && strings.Contains(msg, first)) || (last != "" && strings.Contains(msg, last)) {
			return errors.New("not a valid Redis URL: redis[s]://[user:password@]host:port[/db][?option=value] (details hidden, as they would show the password)")
		}
	}
	return err
}

// validateRedis reports every invalid Redis setting.
func (c Config) validateRedis() error {
	var err error
	switch c.RedisTopology() {
	case TopologySentinel:
		if len(c.RedisCluster) > 0 {
			return errors.New("--redis-sentinels and --redis-cluster are exclusive: a deployment is either Sentinel-managed or a Redis Cluster")
		}
		_, err = c.failoverOptions()
	case TopologyCluster:
		if c.RedisSentinelMaster != "" {
			return errors.New("--redis-sentinel-master needs --redis-sentinels, not --redis-cluster")
		}
		_, err = c.clusterOptions()
	default:
		if c.RedisSentinelMaster != "" {
			return errors.New("--redis-sentinel-master (INVLEDGER_REDIS_SENTINEL_MASTER) needs --redis-sentinels (INVLEDGER_REDIS_SENTINELS)")
		}
		if _, perr := redis.ParseURL(c.redisURL()); perr != nil {
			err = fmt.Errorf("--redis-url (INVLEDGER_REDIS_URL): %w", hideURL(c.redisURL(), perr))
		}
	}
	return err
}

// RedisTarget describes cfg's Redis for logs and error messages, with no
// password: the redacted URL, the cluster's seeds or the Sentinel master.
func (c Config) RedisTarget() string {
	switch c.RedisTopology() {
	case TopologySentinel:
		return fmt.Sprintf("sentinel master %q via %s", c.RedisSentinelMaster, RedactList(c.RedisSentinels))
	case TopologyCluster:
		return "cluster " + RedactList(c.RedisCluster)
	}
	return RedactURL(c.redisURL())
}

// ClusterStateReloadInterval is how old a cluster client's slot map may
// grow before a command reloads it in the background.
const ClusterStateReloadInterval = time.Second

// NewRedisClient makes a client for cfg's Redis: one server, a Redis
// Cluster or a Sentinel-managed master. poolSize 0 means the go-redis
// default. The client honours context deadlines, as newRedisClient says.
func NewRedisClient(cfg Config, poolSize int) (redis.UniversalClient, error) {
	return newRedisClient(cfg, poolSize, nil)
}

// newRedisClient is NewRedisClient whose nodeRunWatch, if not nil, learns the node run (master_replid) of every node connected
// to. The client honours context deadlines (ContextTimeoutEnabled):
// without it go-redis ignores them and a blocked read waits out its own
// ReadTimeout and retries, beyond any deadline.
func newRedisClient(cfg Config, poolSize int, nodeRunWatch *redisinventory.NodeRunWatch) (redis.UniversalClient, error) {
	if err := cfg.validateRedis(); err != nil {
		return nil, err
	}
	switch cfg.RedisTopology() {
	case TopologyCluster:
		opts, _ := cfg.clusterOptions() // validated above
		opts.PoolSize, opts.ContextTimeoutEnabled = poolSize, true
		// go-redis reloads its slot map on MOVED, ASK and READONLY, not on a
		// master that refuses connections: with its default (60 s), a client
		// kept sending a dead master's slots to it for up to a minute after
		// its replica took over (the projector's client, whose reads and
		// acks then stalled). A CLUSTER SLOTS a second is cheap.
		if opts.ClusterStateReloadInterval == 0 {
			opts.ClusterStateReloadInterval = ClusterStateReloadInterval
		}
		if nodeRunWatch != nil {
			nodeRunWatch.AttachCluster(opts)
		}
		return redis.NewClusterClient(opts), nil
	case TopologySentinel:
		opts, _ := cfg.failoverOptions()
		opts.PoolSize, opts.ContextTimeoutEnabled = poolSize, true
		if nodeRunWatch != nil {
			nodeRunWatch.AttachFailover(opts)
		}
		return redis.NewFailoverClient(opts), nil
	}
	opts, _ := redis.ParseURL(cfg.redisURL())
	opts.PoolSize, opts.ContextTimeoutEnabled = poolSize, true
	if nodeRunWatch != nil {
		nodeRunWatch.Attach(opts)
	}
	return redis.NewClient(opts), nil
}
