package localstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterConfig configures a private Redis Cluster started by
// StartRedisCluster.
type ClusterConfig struct {
	// Dir holds one directory per node (node0, node1, ...). Required.
	Dir string
	// Masters is the number of masters, at least 3 (Redis Cluster's
	// minimum). Default 3.
	Masters int
	// ReplicasPerMaster gives each master this many replicas. Default 0.
	ReplicasPerMaster int
	// AppendFsync is every node's appendfsync; default always.
	AppendFsync string
	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before the others mark it failed. Default 1s, so a test's
	// failover takes seconds.
	NodeTimeout time.Duration
	// RequireFullCoverage sets cluster-require-full-coverage. The default
	// (false) lets the masters that are up keep serving their slots while
	// another master is down, which is what invledger's deployments want.
	RequireFullCoverage bool
	// Settings are extra directives for every node.
	Settings map[string]string
	// Logger receives start and stop events. Default slog.Default().
	Logger *slog.Logger
}

func (c *ClusterConfig) setDefaults() {
	if c.Masters == 0 {
		c.Masters = 3
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the config at once.
func (c ClusterConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("localstack: ClusterConfig.Dir is required"))
	}
	if c.Masters < 3 {
		errs = append(errs, fmt.Errorf("localstack: ClusterConfig.Masters must be at least 3, got %d", c.Masters))
	}
	if c.ReplicasPerMaster < 0 {
		errs = append(errs, errors.New("localstack: ClusterConfig.ReplicasPerMaster must not be negative"))
	}
	if c.NodeTimeout < 0 {
		errs = append(errs, errors.New("localstack: ClusterConfig.NodeTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

// RedisCluster is a Redis Cluster of private redis-server processes, made by
// `redis-cli --cluster create`. Nodes can be killed and restarted in place:
// each keeps its port, data and node id (nodes.conf in its directory).
type RedisCluster struct {
	// Nodes are every node, the first Masters of them created as masters.
	// Roles change on failover; ask Redis (CLUSTER NODES) for the current ones.
	Nodes []*RedisServer
	cfg   ClusterConfig
}

// StartRedisCluster starts the nodes, joins them into one cluster with
// every slot assigned and returns once every node reports cluster_state:ok.
// On failure, the nodes started are killed.
func StartRedisCluster(ctx context.Context, cfg ClusterConfig) (_ *RedisCluster, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errors.New("localstack: redis-cli not found in PATH: it ships with redis-server (Debian: apt-get install redis-tools)")
	}
	c := &RedisCluster{cfg: cfg}
	defer func() {
		if err != nil {
			c.kill()
		}
	}()
	n := cfg.Masters * (1 + cfg.ReplicasPerMaster)
	for i := range n {
		busPort, err := freePort()
		if err != nil {
			return nil, err
		}
		settings := map[string]string{
			"cluster-enabled":                 "yes",
			"cluster-config-file":             "nodes.conf",
			"cluster-node-timeout":            strconv.FormatInt(cfg.NodeTimeout.Milliseconds(), 10),
			"cluster-port":                    strconv.Itoa(busPort),
			"cluster-require-full-coverage":   yesNo(cfg.RequireFullCoverage),
			"cluster-replica-validity-factor": "0",
		}
		for k, v := range cfg.Settings {
			settings[k] = v
		}
		node, err := StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, "node"+strconv.Itoa(i)),
			AppendFsync: cfg.AppendFsync, Settings: settings, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.ReplicasPerMaster), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("localstack: redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	cfg.Logger.Info("localstack: redis cluster ready", "nodes", c.Addrs())
	return c, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Masters returns the number of masters the cluster was created with.
func (c *RedisCluster) Masters() int { return c.cfg.Masters }

// Addrs returns every node's address, the seeds for a cluster client.
func (c *RedisCluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// WaitHealthy waits until every running node reports cluster_state:ok and
// agrees on which node serves every slot, for at most 20 s.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	if err := waitFor(ctx, func() error { return c.healthy(ctx) }); err != nil {
		return fmt.Errorf("localstack: redis cluster not healthy: %w", err)
	}
	return nil
}

func (c *RedisCluster) healthy(ctx context.Context) error {
	var want string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		client := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, PoolSize: 1})
		info, err := client.ClusterInfo(ctx).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7.0, and invledger supports Redis >= 6.2 (docs/configuration.md)
			slots, err = client.ClusterSlots(ctx).Result()
		}
		_ = client.Close()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", n.Addr())
		}
		got := slotOwners(slots)
		if want == "" {
			want = got
		} else if got != want {
			return fmt.Errorf("%s: slot owners differ from the other nodes'", n.Addr())
		}
	}
	return nil
}

// slotOwners renders which master serves each slot range.
func slotOwners(slots []redis.ClusterSlot) string {
	var b strings.Builder
	for _, s := range slots {
		if len(s.Nodes) > 0 {
			fmt.Fprintf(&b, "%d-%d=%s;", s.Start, s.End, s.Nodes[0].Addr)
		}
	}
	return b.String()
}

// MasterFor returns the running node that serves key as master, as the
// node at index 0 of the cluster answers it.
func (c *RedisCluster) MasterFor(ctx context.Context, key string) (*RedisServer, error) {
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.runningAddrs(), MaxRetries: -1})
	defer client.Close()
	m, err := client.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if n.Addr() == m.Options().Addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("localstack: master %s of %s is not a node of this cluster", m.Options().Addr, key)
}

func (c *RedisCluster) runningAddrs() []string {
	var addrs []string
	for _, n := range c.Nodes {
		if n.Running() {
			addrs = append(addrs, n.Addr())
		}
	}
	return addrs
}

// MoveSlot migrates slot, keys and all, to the master to, as `redis-cli
// --cluster reshard` does: IMPORTING on the target, MIGRATING on the
// source, MIGRATE of its keys in batches, then SETSLOT NODE on every
// master. Clients meanwhile get ASK redirects, and TRYAGAIN for commands
// over several keys of the slot split between the two.
func (c *RedisCluster) MoveSlot(ctx context.Context, slot int, to *RedisServer) error {
	clients := map[string]*redis.Client{}
	client := func(addr string) *redis.Client {
		if cl, ok := clients[addr]; ok {
			return cl
		}
		cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		clients[addr] = cl
		return cl
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	dst := client(to.Addr())
	//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7.0, and invledger supports Redis >= 6.2 (docs/configuration.md)
	slots, err := dst.ClusterSlots(ctx).Result()
	if err != nil {
		return err
	}
	var from string
	for _, s := range slots {
		if int(s.Start) <= slot && slot <= int(s.End) && len(s.Nodes) > 0 {
			from = s.Nodes[0].Addr
		}
	}
	if from == "" || from == to.Addr() {
		return fmt.Errorf("localstack: slot %d is served by %q: nothing to move to %s", slot, from, to.Addr())
	}
	src := client(from)
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return err
	}
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		return fmt.Errorf("localstack: SETSLOT IMPORTING: %w", err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		return fmt.Errorf("localstack: SETSLOT MIGRATING: %w", err)
	}
	host, port, _ := strings.Cut(to.Addr(), ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("localstack: MIGRATE: %w", err)
		}
	}
	// The target first, so the slot never has no owner.
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if n.Running() && n.Addr() != to.Addr() {
			if err := client(n.Addr()).Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err(); err != nil &&
				!strings.Contains(err.Error(), "replica") {
				return fmt.Errorf("localstack: SETSLOT NODE on %s: %w", n.Addr(), err)
			}
		}
	}
	return c.WaitHealthy(ctx)
}

// ReplicaOf returns a running replica of master.
func (c *RedisCluster) ReplicaOf(ctx context.Context, master *RedisServer) (*RedisServer, error) {
	_, port, _ := strings.Cut(master.Addr(), ":")
	for _, n := range c.Nodes {
		if !n.Running() || n == master {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		info, err := cl.Info(ctx, "replication").Result()
		_ = cl.Close()
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+port+"\r") {
			return n, nil
		}
	}
	return nil, fmt.Errorf("localstack: no running replica of %s", master.Addr())
}

// Failover promotes replica with CLUSTER FAILOVER (coordinated: the master
// stops writes until the replica has caught up) and waits until the
// cluster is healthy with it as master.
func (c *RedisCluster) Failover(ctx context.Context, replica *RedisServer) error {
	cl := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		return fmt.Errorf("localstack: CLUSTER FAILOVER: %w", err)
	}
	if err := waitFor(ctx, func() error {
		info, err := cl.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "role:master") {
			err = errors.New("not promoted yet")
		}
		return err
	}); err != nil {
		return err
	}
	return c.WaitHealthy(ctx)
}

// Stop stops every node gracefully.
func (c *RedisCluster) Stop(ctx context.Context) error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop(ctx))
	}
	return errors.Join(errs...)
}

func (c *RedisCluster) kill() {
	for _, n := range c.Nodes {
		_ = n.Kill()
	}
}
