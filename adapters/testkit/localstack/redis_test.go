package localstack_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestRedisKeepsAcknowledgedWritesAcrossKill(t *testing.T) {
	t.Parallel()
	srv := localstacktest.Redis(t)
	ctx := context.Background()

	host, port, err := net.SplitHostPort(srv.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addr() = %q, want 127.0.0.1:<port>", srv.Addr())
	}
	if p, _ := strconv.Atoi(port); p == 0 || p == localstack.DefaultRedisPort {
		t.Fatalf("Addr() port = %s, want a free non-default port", port)
	}
	if want := "redis://" + srv.Addr() + "/0"; srv.URL() != want {
		t.Fatalf("URL() = %q, want %q", srv.URL(), want)
	}

	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", srv.URL(), err)
	}
	opts.MaxRetries = -1
	client := redis.NewClient(opts)
	defer client.Close()

	if err := client.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir(), "appendonlydir")); err != nil {
		t.Fatalf("AOF directory missing: %v", err)
	}

	if err := srv.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := client.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Kill, want the server gone")
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got, err := client.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET after Kill+Restart = %q, %v; want v1", got, err)
	}

	// Restart of a running server stops it gracefully first.
	if err := client.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("Restart while running: %v", err)
	}
	if got, err := client.Get(ctx, "k").Result(); err != nil || got != "v2" {
		t.Fatalf("GET after Restart = %q, %v; want v2", got, err)
	}

	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v, want nil", err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatalf("Kill of stopped server: %v, want nil", err)
	}
}

func TestRedisStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	localstacktest.SkipShort(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, err := localstack.StartRedis(ctx, localstack.RedisConfig{Dir: t.TempDir(), Port: busy})
	if err == nil {
		_ = srv.Kill()
		t.Fatal("StartRedis on a busy port succeeded, want an error")
	}
	for _, want := range []string{"did not become ready", "redis.log", "Address already in use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestRedisConfigValidate(t *testing.T) {
	ctx := context.Background()
	_, err := localstack.StartRedis(ctx, localstack.RedisConfig{Port: localstack.DefaultRedisPort, AppendFsync: "sometimes"})
	if err == nil {
		t.Fatal("StartRedis with a bad config succeeded")
	}
	for _, want := range []string{"Dir is required", "6379", "sometimes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if err := (localstack.RedisConfig{Dir: "x", AppendFsync: "everysec"}).Validate(); err != nil {
		t.Errorf("Validate of a good config: %v", err)
	}
}

// TestServersRefuseToStartUnderShort: under -short (make check) starting a
// server panics, so a test that forgets to skip fails instead of starting
// one. It runs only under -short, the case it checks.
func TestServersRefuseToStartUnderShort(t *testing.T) {
	if !testing.Short() {
		t.Skip("checks what -short does")
	}
	defer func() {
		if r := recover(); !strings.Contains(fmt.Sprint(r), "test run with -short started redis-server") {
			t.Fatalf("StartRedis under -short: recovered %v, want the panic naming redis-server", r)
		}
	}()
	srv, err := localstack.StartRedis(context.Background(), localstack.RedisConfig{Dir: t.TempDir()})
	if err == nil {
		_ = srv.Kill()
	}
}

// TestRedisDiesWithParent checks Pdeathsig: a redis-server started by a
// process that is killed with SIGKILL goes away too.
func TestRedisDiesWithParent(t *testing.T) {
	t.Parallel()
	localstacktest.SkipShort(t)
	if dir := os.Getenv("LOCALSTACK_TEST_HELPER_DIR"); dir != "" {
		srv, err := localstack.StartRedis(context.Background(), localstack.RedisConfig{Dir: dir})
		if err != nil {
			os.Stdout.WriteString("ERR " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ADDR " + srv.Addr() + "\n")
		time.Sleep(time.Minute) // killed by the parent test
		os.Exit(1)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRedisDiesWithParent$")
	cmd.Env = append(os.Environ(), "LOCALSTACK_TEST_HELPER_DIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDR ") {
		t.Fatalf("helper said %q, %v; want ADDR <addr>", line, err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "ADDR "))
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Fatalf("helper's redis at %s not reachable: %v", addr, err)
	} else {
		c.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // gone, as it should be
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("redis-server at %s still answers 5s after its parent was killed", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
