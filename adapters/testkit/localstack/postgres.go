package localstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPostgresPort is the port of the machine's own PostgreSQL; localstack refuses it.
const DefaultPostgresPort = 5432

// PostgresConfig configures a private PostgreSQL started by StartPostgres.
//
// Layout inside Dir: data/ (PGDATA), sock/ (Unix socket directory),
// postgres.log (server output) and initdb.log.
type PostgresConfig struct {
	// Dir is the server's own directory. Required; created if missing.
	// Starting on a Dir used before reuses its data. When running as root,
	// Dir is chowned to the postgres OS user and all its ancestors must be
	// traversable by that user (see the package doc).
	Dir string

	// Port is the TCP port on 127.0.0.1. 0 (default) picks a free port; the
	// port is then kept across Start. 5432 is refused.
	Port int

	// Fsync runs the server with fsync=on, so committed data also survives an
	// OS crash or power loss: set it for `invledger dev`. The default (false)
	// runs with fsync=off and initdb --no-sync, which is faster and is right
	// for tests: every commit is still written to the OS before it is
	// acknowledged (synchronous_commit stays on), so committed data survives
	// Kill, StopImmediate and any other death of the server processes.
	Fsync bool

	// BinDir is the directory holding postgres and initdb. Default: that of
	// postgres in PATH, else the highest /usr/lib/postgresql/*/bin.
	BinDir string

	// Settings are extra server settings passed as -c name=value after the
	// defaults (listen_addresses, fsync, max_connections=200,
	// shared_buffers=128MB), which they override.
	Settings map[string]string

	// StartTimeout bounds how long StartPostgres and Start wait, including
	// initdb and crash recovery, unless ctx ends sooner. Default: 60s.
	StartTimeout time.Duration

	// StopTimeout bounds how long Stop and StopImmediate wait for the server
	// to exit before they fall back to SIGKILL, unless ctx ends sooner.
	// Default: 30s.
	StopTimeout time.Duration

	// Logger receives start and stop events. Default: slog.Default().
	Logger *slog.Logger
}

func (c *PostgresConfig) setDefaults() {
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every problem with the config at once. It expects
// defaults to be applied, as StartPostgres does.
func (c PostgresConfig) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("localstack: PostgresConfig.Dir is required: give the directory for the data, socket and logs"))
	}
	errs = append(errs, validatePort("PostgresConfig", c.Port, DefaultPostgresPort, "PostgreSQL"))
	if c.BinDir != "" {
		errs = append(errs, checkPostgresBinDir(c.BinDir))
	}
	for k := range c.Settings {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			errs = append(errs, fmt.Errorf("localstack: PostgresConfig.Settings has an invalid name %q", k))
		}
	}
	if c.StartTimeout < 0 {
		errs = append(errs, errors.New("localstack: PostgresConfig.StartTimeout must not be negative"))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, errors.New("localstack: PostgresConfig.StopTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

// PostgresServer is a postgres (postmaster) child process started by
// StartPostgres. Its methods are safe for concurrent use.
type PostgresServer struct {
	cfg     PostgresConfig // defaults applied, Dir absolute, BinDir set
	port    int
	dataDir string
	sockDir string
	logPath string
	runAs   *osUser // nil: run as the current user

	mu   sync.Mutex
	proc *proc // nil when not running
}

// StartPostgres starts PostgreSQL in cfg.Dir, running initdb first if the
// data directory is empty (superuser postgres, trust authentication, UTF8,
// locale C), and returns once a connection to database postgres succeeds.
// The postmaster is a direct child of this process (no pg_ctl). When
// running as root, initdb and postgres run as the postgres OS user. If the
// server does not come up, it is killed and the error ends with the tail of
// Dir/postgres.log (or Dir/initdb.log).
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*PostgresServer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BinDir == "" {
		dir, err := findPostgresBinDir()
		if err != nil {
			return nil, err
		}
		cfg.BinDir = dir
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("localstack: postgres dir: %w", err)
	}
	cfg.Dir = dir
	p := &PostgresServer{
		cfg:     cfg,
		dataDir: filepath.Join(dir, "data"),
		sockDir: filepath.Join(dir, "sock"),
		logPath: filepath.Join(dir, "postgres.log"),
	}
	if os.Geteuid() == 0 {
		if p.runAs, err = lookupPostgresUser(); err != nil {
			return nil, err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err := p.prepareDirs(); err != nil {
		return nil, err
	}
	if err := p.initdbIfEmpty(ctx); err != nil {
		return nil, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for attempt := 1; ; attempt++ {
		p.port = cfg.Port
		if cfg.Port == 0 {
			if p.port, err = freePort(); err != nil {
				return nil, err
			}
		}
		err = p.startLocked(ctx)
		// A picked port can be taken between picking and binding: pick again.
		if err != nil && cfg.Port == 0 && attempt < 3 && strings.Contains(err.Error(), "Address already in use") {
			continue
		}
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// URL returns the URL of database db as superuser postgres:
// postgres://postgres@127.0.0.1:port/db?sslmode=disable.
func (p *PostgresServer) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port returns the server's TCP port on 127.0.0.1.
func (p *PostgresServer) Port() int { return p.port }

// CreateDatabase creates database name (owned by postgres, from template1).
// It fails if the database exists or the server is not running.
func (p *PostgresServer) CreateDatabase(ctx context.Context, name string) error {
	return p.execAdmin(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops database name if it exists, ending its open sessions
// first (DROP DATABASE ... WITH (FORCE)).
func (p *PostgresServer) DropDatabase(ctx context.Context, name string) error {
	return p.execAdmin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (p *PostgresServer) execAdmin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		return fmt.Errorf("localstack: connect to postgres on port %d (is it running? call Start after Kill or Stop): %w", p.port, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("localstack: %s: %w", sql, err)
	}
	return nil
}

// Kill sends SIGKILL to the postmaster, like a crash, and waits until it and
// the processes it had started (backends, checkpointer, ...) have exited, so
// that Start can run crash recovery at once. Those exit on their own when
// they notice the postmaster is gone; any still alive after 5s get SIGKILL
// too. Killing a server that is not running does nothing.
func (p *PostgresServer) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		return nil
	}
	pm := p.proc
	p.proc = nil
	// Freeze the postmaster so it forks nothing between listing its
	// children and dying.
	_ = pm.signal(syscall.SIGSTOP)
	waitStopped(pm.pid(), time.Second)
	kids := childrenOf(pm.pid())
	pm.kill()
	err := waitGone(kids, 5*time.Second)
	p.cfg.Logger.Info("localstack: postgres killed", "port", p.port)
	return err
}

func waitGone(kids []procStat, grace time.Duration) error {
	deadline := time.Now().Add(grace)
	killed := false
	for {
		var alive []procStat
		for _, k := range kids {
			if k.alive() {
				alive = append(alive, k)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if killed {
				return fmt.Errorf("localstack: %d postgres child processes (first pid %d) survived SIGKILL of the postmaster and themselves", len(alive), alive[0].pid)
			}
			for _, k := range alive {
				_ = syscall.Kill(k.pid, syscall.SIGKILL)
			}
			killed = true
			deadline = time.Now().Add(5 * time.Second)
		}
		kids = alive
		time.Sleep(5 * time.Millisecond)
	}
}

// StopImmediate shuts the server down in immediate mode, as
// pg_ctl stop -m immediate does (SIGQUIT: no checkpoint, crash recovery on
// the next Start), and waits until the postmaster has exited. If it has not
// within StopTimeout or before ctx ends, it is killed as Kill does and an
// error is returned. Stopping a server that is not running does nothing.
func (p *PostgresServer) StopImmediate(ctx context.Context) error {
	return p.stop(ctx, syscall.SIGQUIT, "immediate")
}

// Stop shuts the server down in fast mode, as pg_ctl stop -m fast does
// (SIGINT: sessions are ended, a checkpoint is written), and waits until the
// postmaster has exited. If it has not within StopTimeout or before ctx ends,
// it is killed as Kill does and an error is returned. Stopping a server that
// is not running does nothing.
func (p *PostgresServer) Stop(ctx context.Context) error {
	return p.stop(ctx, syscall.SIGINT, "fast")
}

func (p *PostgresServer) stop(ctx context.Context, sig syscall.Signal, mode string) error {
	p.mu.Lock()
	if p.proc == nil {
		p.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StopTimeout)
	defer cancel()
	if err := p.proc.signal(sig); err != nil {
		p.mu.Unlock()
		return errors.Join(fmt.Errorf("localstack: signal postgres: %w", err), p.Kill())
	}
	select {
	case <-p.proc.done:
		p.proc = nil
		p.mu.Unlock()
		p.cfg.Logger.Info("localstack: postgres stopped", "port", p.port, "mode", mode)
		return nil
	case <-ctx.Done():
		p.mu.Unlock()
		return errors.Join(fmt.Errorf("localstack: postgres did not finish its %s shutdown before the context ended; killed it: %w",
			mode, ctx.Err()), p.Kill())
	}
}

// Start starts the server again after Kill, Stop or StopImmediate, on the
// same port and data (running crash recovery if needed), and returns once a
// connection to database postgres succeeds. Starting a running server does
// nothing.
func (p *PostgresServer) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	return p.startLocked(ctx)
}

func (p *PostgresServer) startLocked(ctx context.Context) error {
	fsync := "off"
	if p.cfg.Fsync {
		fsync = "on"
	}
	args := []string{
		"-D", p.dataDir,
		"-p", strconv.Itoa(p.port),
		"-k", p.sockDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=" + fsync,
		"-c", "max_connections=200",
		"-c", "shared_buffers=128MB",
	}
	keys := make([]string, 0, len(p.cfg.Settings))
	for k := range p.cfg.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-c", k+"="+p.cfg.Settings[k])
	}
	pm, err := startProc(procSpec{
		name:    "postgres",
		bin:     filepath.Join(p.cfg.BinDir, "postgres"),
		args:    args,
		dir:     p.cfg.Dir,
		logPath: p.logPath,
		cred:    p.runAs.credential(),
	})
	if err != nil {
		return err
	}
	if err := waitPostgresReady(ctx, p.URL("postgres"), pm); err != nil {
		pm.kill()
		return pm.withLog(fmt.Errorf("localstack: postgres on 127.0.0.1:%d in %s did not become ready: %w; "+
			"see its log below", p.port, p.cfg.Dir, err))
	}
	p.proc = pm
	p.cfg.Logger.Info("localstack: postgres ready", "url", p.URL("postgres"), "dir", p.cfg.Dir, "pid", pm.pid())
	return nil
}

func waitPostgresReady(ctx context.Context, connURL string, pm *proc) error {
	var lastErr error
	for {
		if pm.exited() {
			return pm.exitError()
		}
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(actx, connURL)
		if err == nil {
			err = conn.Ping(actx)
			conn.Close(context.Background())
		}
		acancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), lastErr)
		case <-pm.done:
			return pm.exitError()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// prepareDirs creates Dir, data/ (0700) and sock/ and, when running as
// root, hands them to the postgres user after checking it can reach them.
func (p *PostgresServer) prepareDirs() error {
	if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("localstack: create postgres dir: %w", err)
	}
	if err := os.Mkdir(p.dataDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("localstack: create postgres data dir: %w", err)
	}
	if err := os.Mkdir(p.sockDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("localstack: create postgres socket dir: %w", err)
	}
	if p.runAs == nil {
		return nil
	}
	if err := p.runAs.checkCanReach(p.cfg.Dir); err != nil {
		return err
	}
	for _, d := range []string{p.cfg.Dir, p.dataDir, p.sockDir} {
		if err := os.Chown(d, p.runAs.uid, p.runAs.gid); err != nil {
			return fmt.Errorf("localstack: give %s to the %s user: %w", d, p.runAs.name, err)
		}
	}
	return nil
}

func (p *PostgresServer) initdbIfEmpty(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(p.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	ents, err := os.ReadDir(p.dataDir)
	if err != nil {
		return fmt.Errorf("localstack: read postgres data dir: %w", err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("localstack: %s is neither empty nor a PostgreSQL data directory (no PG_VERSION): "+
			"remove it, or point PostgresConfig.Dir elsewhere", p.dataDir)
	}
	args := []string{"-D", p.dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"}
	if !p.cfg.Fsync {
		args = append(args, "--no-sync")
	}
	logPath := filepath.Join(p.cfg.Dir, "initdb.log")
	ip, err := startProc(procSpec{
		name:    "initdb",
		bin:     filepath.Join(p.cfg.BinDir, "initdb"),
		args:    args,
		dir:     p.cfg.Dir,
		logPath: logPath,
		cred:    p.runAs.credential(),
	})
	if err != nil {
		return err
	}
	select {
	case <-ip.done:
	case <-ctx.Done():
		ip.kill()
		return ip.withLog(fmt.Errorf("localstack: initdb in %s did not finish in time: %w", p.dataDir, ctx.Err()))
	}
	if ip.waitErr != nil {
		return ip.withLog(fmt.Errorf("localstack: initdb in %s failed: %w; see its output below", p.dataDir, ip.waitErr))
	}
	p.cfg.Logger.Debug("localstack: initdb done", "data", p.dataDir)
	return nil
}
