package localstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelConfig configures a Sentinel-managed primary and its replicas
// started by StartSentinel.
type SentinelConfig struct {
	// Dir holds master/, replica1/, replica2/... and sentinel/. Required.
	Dir string
	// MasterName is the name the Sentinel monitors the master under.
	// Default "invledger".
	MasterName string
	// AppendFsync is every server's appendfsync; default always.
	AppendFsync string
	// Replicas is the number of replicas; default 2, so that one can die
	// and the master still has the replica MinReplicasToWrite asks for.
	Replicas int
	// MinReplicasToWrite is every server's min-replicas-to-write: a master
	// that lost its replicas (one the Sentinel is replacing, among others)
	// refuses writes instead of accepting what the failover will discard.
	// Default 1; -1 sets 0, Redis's own default.
	MinReplicasToWrite int
	// MinReplicasMaxLag is every server's min-replicas-max-lag in seconds;
	// default 2.
	MinReplicasMaxLag int
	// Logger receives start and stop events. Default slog.Default().
	Logger *slog.Logger
}

// SentinelSet is a master, its replicas and one Sentinel (quorum 1) that
// fails over within seconds of the master's death.
type SentinelSet struct {
	Master   *RedisServer
	Replicas []*RedisServer
	cfg      SentinelConfig
	port     int
	sentinel *proc
}

// StartSentinel starts the master, the replicas (REPLICAOF the master) and
// the Sentinel, and returns once the replicas are in sync and the Sentinel
// names the master.
func StartSentinel(ctx context.Context, cfg SentinelConfig) (_ *SentinelSet, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("localstack: SentinelConfig.Dir is required")
	}
	if cfg.MasterName == "" {
		cfg.MasterName = "invledger"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 2
	}
	switch cfg.MinReplicasToWrite {
	case 0:
		cfg.MinReplicasToWrite = 1
	case -1:
		cfg.MinReplicasToWrite = 0
	}
	if cfg.MinReplicasMaxLag == 0 {
		cfg.MinReplicasMaxLag = 2
	}
	s := &SentinelSet{cfg: cfg}
	defer func() {
		if err != nil {
			s.kill()
		}
	}()
	start := func(name string) (*RedisServer, error) {
		return StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, name), AppendFsync: cfg.AppendFsync, Logger: cfg.Logger,
			Settings: map[string]string{
				"min-replicas-to-write": strconv.Itoa(cfg.MinReplicasToWrite),
				"min-replicas-max-lag":  strconv.Itoa(cfg.MinReplicasMaxLag),
			}})
	}
	if s.Master, err = start("master"); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(s.Master.Addr())
	for i := range cfg.Replicas {
		r, err := start(fmt.Sprintf("replica%d", i+1))
		if err != nil {
			return nil, err
		}
		s.Replicas = append(s.Replicas, r)
		if err := replicate(ctx, r, host, port); err != nil {
			return nil, err
		}
	}
	if err := s.startSentinel(ctx, host, port); err != nil {
		return nil, err
	}
	cfg.Logger.Info("localstack: sentinel ready", "master", s.Master.Addr(), "replicas", len(s.Replicas), "sentinel", s.Addr())
	return s, nil
}

// replicate makes r a replica of host:port and waits until it is in sync
// with it.
func replicate(ctx context.Context, r *RedisServer, host, port string) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("localstack: REPLICAOF: %w", err)
	}
	return waitFor(ctx, func() error {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && (!strings.Contains(info, "master_port:"+port+"\r\n") || !strings.Contains(info, "master_link_status:up")) {
			err = fmt.Errorf("replica %s not in sync with %s:%s", r.Addr(), host, port)
		}
		return err
	})
}

func (s *SentinelSet) startSentinel(ctx context.Context, host, port string) error {
	dir := filepath.Join(s.cfg.Dir, "sentinel")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var err error
	if s.port, err = freePort(); err != nil {
		return err
	}
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 3000\nsentinel parallel-syncs %s 2\n",
		s.port, dir, s.cfg.MasterName, host, port, s.cfg.MasterName, s.cfg.MasterName, s.cfg.MasterName)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return err
	}
	bin, err := findRedisServer()
	if err != nil {
		return err
	}
	p, err := startProc(procSpec{name: "redis-sentinel", bin: bin, args: []string{conf, "--sentinel"}, dir: dir,
		logPath: filepath.Join(dir, "sentinel.log")})
	if err != nil {
		return err
	}
	s.sentinel = p
	return waitFor(ctx, func() error {
		addr, err := s.MasterAddr(ctx)
		if err == nil && addr != net.JoinHostPort(host, port) {
			err = fmt.Errorf("sentinel names %s", addr)
		}
		return err
	})
}

// waitFor retries f every 50 ms until it succeeds, for at most 20 s.
func waitFor(ctx context.Context, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localstack: %w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addr is the Sentinel's address.
func (s *SentinelSet) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// MasterName is the name the Sentinel monitors the master under.
func (s *SentinelSet) MasterName() string { return s.cfg.MasterName }

// MasterAddr asks the Sentinel which node is master.
func (s *SentinelSet) MasterAddr(ctx context.Context) (string, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, s.cfg.MasterName).Result()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// Failover makes the Sentinel promote a replica (SENTINEL FAILOVER) and
// waits until it names the new master, which then is Master; the old
// master joins Replicas.
func (s *SentinelSet) Failover(ctx context.Context) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.Failover(ctx, s.cfg.MasterName).Err(); err != nil {
		return fmt.Errorf("localstack: SENTINEL FAILOVER: %w", err)
	}
	return s.waitPromoted(ctx, nil)
}

// waitPromoted waits until the Sentinel names one of the replicas as
// master, swaps it with Master, and returns once every replica but dead
// is in sync with it, so that a second failover finds the set whole. The
// Sentinel reconfigures an old master that is still alive only once it
// looks at it again, up to 10 s later; the set sends it the same REPLICAOF
// at once, and the same to every other replica (a no-op where the Sentinel
// was first).
func (s *SentinelSet) waitPromoted(ctx context.Context, dead *RedisServer) error {
	promoted := -1
	if err := waitFor(ctx, func() error {
		addr, err := s.MasterAddr(ctx)
		if err != nil {
			return err
		}
		for i, r := range s.Replicas {
			if r.Addr() == addr {
				promoted = i
				return nil
			}
		}
		return fmt.Errorf("sentinel still names %s", addr)
	}); err != nil {
		return err
	}
	s.Master, s.Replicas[promoted] = s.Replicas[promoted], s.Master
	host, port, _ := net.SplitHostPort(s.Master.Addr())
	for _, r := range s.Replicas {
		if r == dead {
			continue
		}
		if err := replicate(ctx, r, host, port); err != nil {
			return err
		}
	}
	return nil
}

// KillMaster kills the master with SIGKILL and waits until the Sentinel has
// promoted a replica; the old master, now in Replicas, stays down (Restart
// it to rejoin as a replica).
func (s *SentinelSet) KillMaster(ctx context.Context) error {
	dead := s.Master
	if err := dead.Kill(); err != nil {
		return err
	}
	return s.waitPromoted(ctx, dead)
}

// Stop stops the Sentinel and both servers.
func (s *SentinelSet) Stop(ctx context.Context) error {
	var errs []error
	if s.sentinel != nil {
		errs = append(errs, s.sentinel.stop(ctx, syscall.SIGTERM))
	}
	for _, r := range append([]*RedisServer{s.Master}, s.Replicas...) {
		if r != nil {
			errs = append(errs, r.Stop(ctx))
		}
	}
	return errors.Join(errs...)
}

func (s *SentinelSet) kill() {
	if s.sentinel != nil {
		s.sentinel.kill()
	}
	for _, r := range append([]*RedisServer{s.Master}, s.Replicas...) {
		if r != nil {
			_ = r.Kill()
		}
	}
}
