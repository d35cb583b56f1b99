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
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// DefaultRedisPort is the port of the machine's own Redis; localstack refuses it.
const DefaultRedisPort = 6379

// RedisConfig configures a private redis-server started by StartRedis.
type RedisConfig struct {
	// Dir is the server's own directory: the AOF (appendonlydir/) and
	// redis.log live here. Required; created if missing. Starting on a Dir
	// used before loads its AOF.
	Dir string

	// Port is the port on 127.0.0.1. 0 (default) picks a free port; the port
	// is then kept across Restart. 6379 is refused.
	Port int

	// DisableAppendOnly runs the server with --appendonly no. The default
	// (false) is --appendonly yes, so data survives Kill and Restart.
	DisableAppendOnly bool

	// AppendFsync is the AOF fsync policy: "always" (default: every write is
	// on disk before it is acknowledged), "everysec" or "no".
	AppendFsync string

	// Binary is the redis-server executable. Default: redis-server from PATH.
	Binary string

	// Settings are extra configuration directives, e.g. {"cluster-enabled": "yes"}.
	Settings map[string]string

	// StartTimeout bounds how long StartRedis and Restart wait for the server
	// to answer PING, unless ctx ends sooner. Default: 10s.
	StartTimeout time.Duration

	// StopTimeout bounds how long Stop waits after SIGTERM before it falls
	// back to SIGKILL, unless ctx ends sooner. Default: 10s.
	StopTimeout time.Duration

	// Logger receives start and stop events. Default: slog.Default().
	Logger *slog.Logger
}

func (c *RedisConfig) setDefaults() {
	if c.AppendFsync == "" {
		c.AppendFsync = "always"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the config at once. It expects
// defaults to be applied, as StartRedis does.
func (c RedisConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("localstack: RedisConfig.Dir is required: give the directory for the AOF and redis.log"))
	}
	errs = append(errs, validatePort("RedisConfig", c.Port, DefaultRedisPort, "Redis"))
	switch c.AppendFsync {
	case "always", "everysec", "no":
	default:
		errs = append(errs, fmt.Errorf("localstack: RedisConfig.AppendFsync %q is not one of always, everysec, no", c.AppendFsync))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, errors.New("localstack: RedisConfig.StartTimeout must not be negative"))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, errors.New("localstack: RedisConfig.StopTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

func validatePort(cfgName string, port, defaultPort int, what string) error {
	switch {
	case port < 0 || port > 65535:
		return fmt.Errorf("localstack: %s.Port %d is out of range: use 0 for a free port", cfgName, port)
	case port == defaultPort:
		return fmt.Errorf("localstack: %s.Port %d is the default %s port, which belongs to the machine's own instance: "+
			"use 0 for a free port or another port", cfgName, port, what)
	}
	return nil
}

// RedisServer is a redis-server child process started by StartRedis. Its
// methods are safe for concurrent use.
type RedisServer struct {
	cfg     RedisConfig // defaults applied, Dir absolute
	port    int
	logPath string

	mu   sync.Mutex
	proc *proc // nil when not running
}

// StartRedis starts redis-server on 127.0.0.1 in cfg.Dir and returns once it
// answers PING and has loaded its data (no LOADING error). If the server
// does not come up, it is killed and the error ends with the tail of
// Dir/redis.log.
func StartRedis(ctx context.Context, cfg RedisConfig) (*RedisServer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Binary == "" {
		bin, err := findRedisServer()
		if err != nil {
			return nil, err
		}
		cfg.Binary = bin
	} else if !isExecutable(cfg.Binary) {
		return nil, fmt.Errorf("localstack: RedisConfig.Binary %q is not an executable file: "+
			"point it at redis-server or leave it empty to use the one in PATH", cfg.Binary)
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("localstack: redis dir: %w", err)
	}
	cfg.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localstack: create redis dir: %w", err)
	}
	r := &RedisServer{cfg: cfg, logPath: filepath.Join(dir, "redis.log")}

	r.mu.Lock()
	defer r.mu.Unlock()
	for attempt := 1; ; attempt++ {
		r.port = cfg.Port
		if cfg.Port == 0 {
			if r.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		err = r.startLocked(ctx)
		// A picked port can be taken between picking and binding: pick again.
		if err != nil && cfg.Port == 0 && attempt < 3 && strings.Contains(err.Error(), "Address already in use") {
			continue
		}
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// Addr returns the server's address, 127.0.0.1:port.
func (r *RedisServer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
}

// URL returns the server's URL for database 0, redis://127.0.0.1:port/0.
func (r *RedisServer) URL() string {
	return "redis://" + r.Addr() + "/0"
}

// Dir returns the server's directory (absolute).
func (r *RedisServer) Dir() string { return r.cfg.Dir }

// Running reports whether the server process is up (started and neither
// killed nor stopped since).
func (r *RedisServer) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc != nil
}

// Kill sends SIGKILL to the server and waits until it has exited, like a
// crash. Killing a server that is not running does nothing.
func (r *RedisServer) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return nil
	}
	r.proc.kill()
	r.proc = nil
	r.cfg.Logger.Info("localstack: redis-server killed", "addr", r.Addr())
	return nil
}

// Pause freezes the server with SIGSTOP, like a stall: it keeps its
// connections and the commands sent on them, but answers nothing until
// Resume. Pausing a server that is not running does nothing.
func (r *RedisServer) Pause() error { return r.signal(syscall.SIGSTOP) }

// Resume lets a paused server go on with SIGCONT; it then answers the
// commands sent while it was paused.
func (r *RedisServer) Resume() error { return r.signal(syscall.SIGCONT) }

func (r *RedisServer) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return nil
	}
	if err := r.proc.signal(sig); err != nil {
		return fmt.Errorf("localstack: signal redis-server %v: %w", sig, err)
	}
	return nil
}

// Restart starts the server again with the same directory, port and
// options, so it reloads its AOF, and returns once it answers PING and has
// loaded its data. If the server is still running, Restart first stops it
// gracefully as Stop does.
func (r *RedisServer) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		if err := r.stopLocked(ctx); err != nil {
			return err
		}
	}
	return r.startLocked(ctx)
}

// Stop shuts the server down gracefully: SIGTERM (Redis flushes its AOF),
// then waits for it to exit. If it has not exited within StopTimeout or
// before ctx ends, it is killed with SIGKILL and an error is returned.
// Stopping a server that is not running does nothing.
func (r *RedisServer) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return nil
	}
	return r.stopLocked(ctx)
}

func (r *RedisServer) stopLocked(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StopTimeout)
	defer cancel()
	err := r.proc.stop(ctx, syscall.SIGTERM)
	r.proc = nil
	r.cfg.Logger.Info("localstack: redis-server stopped", "addr", r.Addr())
	return err
}

func (r *RedisServer) startLocked(ctx context.Context) error {
	appendOnly := "yes"
	if r.cfg.DisableAppendOnly {
		appendOnly = "no"
	}
	args := []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.cfg.Dir,
		"--appendonly", appendOnly,
		"--appendfsync", r.cfg.AppendFsync,
		"--save", "",
		"--daemonize", "no",
		"--logfile", r.logPath,
		"--protected-mode", "yes",
	}
	for k, v := range r.cfg.Settings {
		args = append(args, "--"+k, v)
	}
	p, err := startProc(procSpec{
		name:    "redis-server",
		bin:     r.cfg.Binary,
		args:    args,
		dir:     r.cfg.Dir,
		logPath: r.logPath,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	if err := waitRedisReady(ctx, r.Addr(), p); err != nil {
		p.kill()
		return p.withLog(fmt.Errorf("localstack: redis-server on %s in %s did not become ready: %w; "+
			"see its log below", r.Addr(), r.cfg.Dir, err))
	}
	r.proc = p
	r.cfg.Logger.Info("localstack: redis-server ready", "addr", r.Addr(), "dir", r.cfg.Dir, "pid", p.pid())
	return nil
}

// waitRedisReady waits until the server at addr accepts connections and
// answers PING without a LOADING error, or p exits, or ctx ends.
func waitRedisReady(ctx context.Context, addr string, p *proc) error {
	var lastErr error
	for {
		if p.exited() {
			return p.exitError()
		}
		// Plain TCP first: go-redis logs every failed dial.
		var d net.Dialer
		dctx, dcancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		dcancel()
		if err == nil {
			conn.Close()
			err = pingRedis(ctx, addr)
			if err == nil {
				return nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), lastErr)
		case <-p.done:
			return p.exitError()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func pingRedis(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DisableIdentity:          true,
		MaxRetries:               -1,
		DialTimeout:              time.Second,
		ReadTimeout:              time.Second,
		WriteTimeout:             time.Second,
		PoolSize:                 1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer c.Close()
	err := c.Ping(ctx).Err()
	if err != nil && strings.HasPrefix(err.Error(), "LOADING") {
		return fmt.Errorf("still loading its data: %w", err)
	}
	return err
}
