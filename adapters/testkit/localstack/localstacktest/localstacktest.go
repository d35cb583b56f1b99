package localstacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack"
)

const (
	dirPrefix    = "localstacktest-"
	ownerFile    = "owner.pid"
	startTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
)

// SkipShort skips t under -short: `make check` runs the tests that need no
// server in seconds, and every test that starts one is an integration test.
// Every helper here calls it; a test that starts a server some other way
// (through `invledger demo`, `dev` or `bench`, or a browser) calls it, or
// ServerDir, first. localstack panics when a server starts under -short,
// so a test that forgets fails rather than slowing the fast loop.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a server: integration test, skipped with -short")
	}
}

// quiet keeps server lifecycle logs out of test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Redis starts a private redis-server in t.TempDir() with AOF on and
// appendfsync always (change them with opts) and stops it when the test
// ends (SIGTERM, then SIGKILL). It fails the test if the server cannot start.
func Redis(t testing.TB, opts ...func(*localstack.RedisConfig)) *localstack.RedisServer {
	t.Helper()
	cfg := localstack.RedisConfig{Dir: t.TempDir(), Logger: quiet}
	for _, o := range opts {
		o(&cfg)
	}
	return startForTest(t, "redis", func(ctx context.Context) (*localstack.RedisServer, error) { return localstack.StartRedis(ctx, cfg) },
		(*localstack.RedisServer).Stop)
}

// RedisCluster starts a private Redis Cluster (3 masters unless opts say
// otherwise) in t.TempDir() and stops it when the test ends.
func RedisCluster(t testing.TB, opts ...func(*localstack.ClusterConfig)) *localstack.RedisCluster {
	t.Helper()
	cfg := localstack.ClusterConfig{Dir: t.TempDir(), Logger: quiet}
	for _, o := range opts {
		o(&cfg)
	}
	return startForTest(t, "redis cluster", func(ctx context.Context) (*localstack.RedisCluster, error) {
		return localstack.StartRedisCluster(ctx, cfg)
	}, (*localstack.RedisCluster).Stop)
}

// Sentinel starts a private Sentinel-managed master and replica in
// t.TempDir() and stops them when the test ends.
func Sentinel(t testing.TB) *localstack.SentinelSet {
	t.Helper()
	cfg := localstack.SentinelConfig{Dir: t.TempDir(), Logger: quiet}
	return startForTest(t, "sentinel", func(ctx context.Context) (*localstack.SentinelSet, error) {
		return localstack.StartSentinel(ctx, cfg)
	}, (*localstack.SentinelSet).Stop)
}

// startForTest starts what with start, failing the test if it cannot,
// and stops it with stop when the test ends.
func startForTest[T any](t testing.TB, what string, start func(context.Context) (T, error), stop func(T, context.Context) error) T {
	t.Helper()
	SkipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	v, err := start(ctx)
	if err != nil {
		t.Fatalf("localstacktest: start %s: %v", what, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := stop(v, ctx); err != nil {
			t.Logf("localstacktest: stop %s: %v", what, err)
		}
	})
	return v
}

var shared struct {
	once sync.Once
	mu   sync.Mutex
	srv  *localstack.PostgresServer
	dir  string
	err  error
}

// Postgres returns the URL of a new, empty database named t_<random> on the
// PostgreSQL shared by this test binary, starting that server on first use.
// The database is dropped when the test ends. Tests that stop or kill
// PostgreSQL must use PrivatePostgres instead.
func Postgres(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	srv, err := sharedPostgres()
	if err != nil {
		t.Fatalf("localstacktest: start shared postgres: %v", err)
	}
	name := "t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.CreateDatabase(ctx, name); err != nil {
		t.Fatalf("localstacktest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.DropDatabase(ctx, name); err != nil {
			t.Errorf("localstacktest: drop test database: %v", err)
		}
	})
	return srv.URL(name)
}

func sharedPostgres() (*localstack.PostgresServer, error) {
	shared.once.Do(func() {
		sweepStaleDirs()
		dir, err := makeDir()
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		srv, err := localstack.StartPostgres(ctx, localstack.PostgresConfig{Dir: dir, Logger: quiet})
		if err != nil {
			_ = os.RemoveAll(dir)
			shared.err = err
			return
		}
		shared.mu.Lock()
		shared.srv, shared.dir = srv, dir
		shared.mu.Unlock()
	})
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil && shared.err == nil {
		return nil, errors.New("the shared PostgreSQL was stopped by StopShared")
	}
	return shared.srv, shared.err
}

// StopShared stops the shared PostgreSQL, if it was started, and removes its
// directory. Call it from TestMain after m.Run; Postgres fails afterwards.
func StopShared() error {
	shared.once.Do(func() {}) // nothing started now can start later
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	err := shared.srv.StopImmediate(ctx) // throwaway data: no checkpoint needed
	err = errors.Join(err, os.RemoveAll(shared.dir))
	shared.srv, shared.dir = nil, ""
	return err
}

// Main runs the tests, stops the shared PostgreSQL and exits:
//
//	func TestMain(m *testing.M) { localstacktest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "localstacktest:", err)
	}
	os.Exit(code)
}

// PrivatePostgres starts a PostgreSQL of the test's own, for tests that
// stop, kill or restart it, and stops it and removes its directory when the
// test ends. Its directory comes from os.MkdirTemp (not t.TempDir, which the
// postgres OS user cannot reach when tests run as root).
func PrivatePostgres(t testing.TB) *localstack.PostgresServer {
	t.Helper()
	cfg := localstack.PostgresConfig{Dir: ServerDir(t), Logger: quiet}
	return startForTest(t, "postgres", func(ctx context.Context) (*localstack.PostgresServer, error) {
		return localstack.StartPostgres(ctx, cfg)
	}, (*localstack.PostgresServer).StopImmediate) // stopped before ServerDir's removal
}

// ServerDir returns a new directory for a server's data that the postgres
// OS user can reach when tests run as root, and removes it when the test
// ends. Only a server needs one, so it skips t under -short.
func ServerDir(t testing.TB) string {
	t.Helper()
	SkipShort(t)
	dir, err := makeDir()
	if err != nil {
		t.Fatalf("localstacktest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Stack starts a redis-server and a PostgreSQL with a database named
// invledger (what `invledger dev` serves on) in a ServerDir, and stops them
// when the test ends.
func Stack(t testing.TB) *localstack.Stack {
	t.Helper()
	cfg := localstack.StackConfig{Dir: ServerDir(t), Logger: quiet}
	return startForTest(t, "stack", func(ctx context.Context) (*localstack.Stack, error) { return localstack.StartStack(ctx, cfg) },
		func(s *localstack.Stack, _ context.Context) error { s.Stop(); return nil }) // stopped before ServerDir's removal
}

// makeDir creates a 0755 directory under os.TempDir() that records this
// process as its owner.
func makeDir() (string, error) {
	dir, err := os.MkdirTemp("", dirPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("create temp dir for postgres: %w", err)
	}
	err = errors.Join(
		os.Chmod(dir, 0o755),
		os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644),
	)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("prepare temp dir for postgres: %w", err)
	}
	return dir, nil
}

// sweepStaleDirs removes directories made by makeDir whose owner process
// no longer exists. Directories without an owner file are being made right
// now, or are not ours: they are left alone.
func sweepStaleDirs() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range matches {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// WaitFor polls cond every 20 ms until it holds, failing t once timeout
// passed: the tests over real servers wait for what those do on their own
// (a projector's write, a delivery), and a fixed sleep would be either
// slow or flaky.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitProgress polls done every 20 ms until it reports true, failing t
// when the figure it reports (a watermark, a count) has not moved for
// stall, or once limit passed. Catching up is work whose speed depends
// on the machine: a loaded 2-core runner may take minutes where an idle
// one takes seconds, so a fixed deadline is either flaky or slow to
// report a stuck consumer. A stalled figure is what a stuck one looks
// like, and it is reported after stall whatever the machine's load.
func WaitProgress(t testing.TB, what string, stall, limit time.Duration, done func() (ok bool, figure int64)) {
	t.Helper()
	start := time.Now()
	ok, last := done()
	moved := start
	var longest time.Duration // the longest the figure stood still, logged: a pause short of stall is still worth knowing
	for !ok {
		now := time.Now()
		longest = max(longest, now.Sub(moved))
		switch {
		case now.Sub(moved) > stall:
			t.Fatalf("waiting for %s: no progress for %s (stuck at %d, %s in)", what, stall, last, now.Sub(start).Round(time.Millisecond))
		case now.Sub(start) > limit:
			t.Fatalf("waiting for %s: not done after %s (at %d)", what, limit, last)
		}
		time.Sleep(20 * time.Millisecond)
		var figure int64
		ok, figure = done()
		if figure != last {
			last, moved = figure, time.Now()
		}
	}
	if longest > time.Second {
		t.Logf("%s: done after %s, standing still for %s at the longest", what, time.Since(start).Round(time.Millisecond), longest.Round(time.Millisecond))
	}
}
