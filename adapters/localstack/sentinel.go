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

// SentinelConfig configures a Sentinel-managed primary and replica started
// by StartSentinel.
type SentinelConfig struct {
	// Dir holds master/, replica/ and sentinel/. Required.
	Dir string
	// MasterName is the name the Sentinel monitors the master under.
	// Default "invledger".
	MasterName string
	// AppendFsync is both servers' appendfsync; default always.
	AppendFsync string
	// Logger receives start and stop events. Default slog.Default().
	Logger *slog.Logger
}

// SentinelSet is a master, its replica and one Sentinel (quorum 1) that
// fails over within seconds of the master's death.
type SentinelSet struct {
	Master, Replica *RedisServer
	cfg             SentinelConfig
	port            int
	sentinel        *proc
}

// StartSentinel starts the master, the replica (REPLICAOF the master) and
// the Sentinel, and returns once the replica is in sync and the Sentinel
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
	s := &SentinelSet{cfg: cfg}
	defer func() {
		if err != nil {
			s.kill()
		}
	}()
	start := func(name string) (*RedisServer, error) {
		return StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, name), AppendFsync: cfg.AppendFsync, Logger: cfg.Logger})
	}
	if s.Master, err = start("master"); err != nil {
		return nil, err
	}
	if s.Replica, err = start("replica"); err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(s.Master.Addr())
	replica := redis.NewClient(&redis.Options{Addr: s.Replica.Addr()})
	defer replica.Close()
	if err := replica.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return nil, fmt.Errorf("localstack: REPLICAOF: %w", err)
	}
	if err := waitFor(ctx, func() error {
		info, err := replica.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("replica not in sync")
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := s.startSentinel(ctx, host, port); err != nil {
		return nil, err
	}
	cfg.Logger.Info("localstack: sentinel ready", "master", s.Master.Addr(), "replica", s.Replica.Addr(), "sentinel", s.Addr())
	return s, nil
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
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %s 1\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 3000\n",
		s.port, dir, s.cfg.MasterName, host, port, s.cfg.MasterName, s.cfg.MasterName)
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

// Failover makes the Sentinel promote the replica (SENTINEL FAILOVER) and
// waits until it names the new master. Master and Replica swap.
func (s *SentinelSet) Failover(ctx context.Context) error {
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.Failover(ctx, s.cfg.MasterName).Err(); err != nil {
		return fmt.Errorf("localstack: SENTINEL FAILOVER: %w", err)
	}
	return s.waitPromoted(ctx)
}

// waitPromoted waits until the Sentinel names the replica as master, and
// swaps Master and Replica.
func (s *SentinelSet) waitPromoted(ctx context.Context) error {
	if err := waitFor(ctx, func() error {
		addr, err := s.MasterAddr(ctx)
		if err == nil && addr != s.Replica.Addr() {
			err = fmt.Errorf("sentinel still names %s", addr)
		}
		return err
	}); err != nil {
		return err
	}
	s.Master, s.Replica = s.Replica, s.Master
	return nil
}

// KillMaster kills the master with SIGKILL and waits until the Sentinel has
// promoted the replica; the old master stays down (Restart it to rejoin
// as a replica).
func (s *SentinelSet) KillMaster(ctx context.Context) error {
	if err := s.Master.Kill(); err != nil {
		return err
	}
	return s.waitPromoted(ctx)
}

// Stop stops the Sentinel and both servers.
func (s *SentinelSet) Stop(ctx context.Context) error {
	var errs []error
	if s.sentinel != nil {
		errs = append(errs, s.sentinel.stop(ctx, syscall.SIGTERM))
	}
	for _, r := range []*RedisServer{s.Master, s.Replica} {
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
	for _, r := range []*RedisServer{s.Master, s.Replica} {
		if r != nil {
			_ = r.Kill()
		}
	}
}
