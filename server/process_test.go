package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/invledger/invledger/app"
	"github.com/invledger/invledger/internal/redis/redisbatch"
	"github.com/invledger/invledger/internal/stacktest"
)

// childEnv holds the JSON childConfig of a serve child process: TestMain
// runs serveChild instead of the tests when it is set.
const childEnv = "INVLEDGER_TEST_SERVE_CHILD"

// childConfig is what a serve child process runs.
type childConfig struct {
	RedisCluster      []string
	RedisURL          string // when RedisCluster is empty
	DatabaseURL       string
	Components        []string
	ReconcileInterval time.Duration
	DataDir           string
	// WebhookAllowNets are app.Config's: those of the stack the child
	// serves.
	WebhookAllowNets []string
	// ReclaimAfter is the projector's ReclaimAfter; 0 keeps its default.
	ReclaimAfter time.Duration
	// PauseOrderAfterLines, if not zero, makes every order placing stop
	// for good once that many lines are reserved, after printing
	// ORDER-PAUSED, so the test can kill the process between two lines.
	PauseOrderAfterLines int
	// PauseConfirmAfterLines does the same to every order confirm once
	// that many lines are confirmed, printing CONFIRM-PAUSED.
	PauseConfirmAfterLines int
	// Export is the broker export the child runs with ComponentExport.
	Export ExportConfig
}

// A child retries webhook deliveries quickly, so that a test's receiver
// that fails half its requests costs seconds, not minutes.
const childWebhookMinBackoff, childWebhookMaxBackoff = 5 * time.Millisecond, 500 * time.Millisecond

// serveChild runs Serve as a separate process would, until SIGTERM, and
// prints LISTENING <addr> once it accepts connections.
func serveChild() int {
	var cc childConfig
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &cc); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(ctx, app.Config{RedisCluster: cc.RedisCluster, RedisURL: cc.RedisURL, DatabaseURL: cc.DatabaseURL,
		WebhookAllowNets: cc.WebhookAllowNets, Logger: log})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer a.Close()
	a.Orders.SetAfterLine(func(op string, line int) {
		switch {
		case op == "place" && line+1 == cc.PauseOrderAfterLines:
			fmt.Println("ORDER-PAUSED")
			select {}
		case op == "confirm" && line+1 == cc.PauseConfirmAfterLines:
			fmt.Println("CONFIRM-PAUSED")
			select {}
		}
	})
	err = Serve(ctx, a, Config{Components: cc.Components, Listen: "127.0.0.1:0", Tokens: testTokens, DataDir: cc.DataDir,
		ReconcileInterval: cc.ReconcileInterval, ReclaimAfter: cc.ReclaimAfter,
		WebhookMinBackoff: childWebhookMinBackoff, WebhookMaxBackoff: childWebhookMaxBackoff, Export: cc.Export,
		OnListening: func(addr string) { fmt.Println("LISTENING", addr) }})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	return 0
}

// childReclaimAfter is the serve children's ReclaimAfter: a dead child's
// entries are taken over within seconds, not the default 30 s.
const childReclaimAfter = 3 * time.Second

// consumer returns the prefix of the process's projector consumer names
// (see redisbatch.ConsumerName), once the process has started.
func (p *serveProcess) consumer(t *testing.T) string {
	t.Helper()
	name, err := redisbatch.ConsumerName("", p.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return name + "-"
}

// serveProcess is a serve child process.
type serveProcess struct {
	cmd     *exec.Cmd
	url     string
	dataDir string
}

// startServeProcess starts this test binary as a serve process over st's
// cluster and database, running components, and waits until it listens.
// The test's end kills it.
func startServeProcess(t *testing.T, st *stacktest.Stack, interval time.Duration, components ...string) *serveProcess {
	t.Helper()
	p, lines := spawnServeProcess(t, st, interval, components...)
	p.waitListening(t, lines)
	return p
}

// spawnServeProcess starts the process without waiting for it; its
// LISTENING or ERR line arrives on lines.
func spawnServeProcess(t *testing.T, st *stacktest.Stack, interval time.Duration, components ...string) (*serveProcess, <-chan string) {
	t.Helper()
	cc := childConfig{DatabaseURL: st.DatabaseURL, Components: components, WebhookAllowNets: st.App.Config().WebhookAllowNets,
		ReconcileInterval: interval, DataDir: t.TempDir(), ReclaimAfter: childReclaimAfter}
	if st.Cluster != nil {
		cc.RedisCluster = st.Cluster.Addrs()
	} else {
		cc.RedisURL = st.Redis.URL()
	}
	return spawnChild(t, cc)
}

// spawnChild starts a serve process running c; its LISTENING, ERR and
// ORDER-PAUSED and CONFIRM-PAUSED lines arrive on lines.
func spawnChild(t *testing.T, c childConfig) (*serveProcess, <-chan string) {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, dataDir: c.DataDir}
	t.Cleanup(p.kill)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "LISTENING ") || strings.HasPrefix(line, "ERR") || line == "ORDER-PAUSED" || line == "CONFIRM-PAUSED" {
				lines <- line
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p, lines
}

// waitListening waits for the process's LISTENING line.
func (p *serveProcess) waitListening(t *testing.T, lines <-chan string) {
	t.Helper()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(line, "LISTENING ")
		if !ok {
			t.Fatalf("serve process: %s", line)
		}
		p.url = "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatal("serve process did not listen within 30s")
	}
}

// kill ends the process with SIGKILL: no deferred call, no graceful stop.
func (p *serveProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}
