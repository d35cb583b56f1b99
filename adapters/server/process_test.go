package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/servechild"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/projections"
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

// serveChild runs Serve as a separate process would; servechild.Main
// runs it until SIGTERM.
func serveChild(ctx context.Context, cc childConfig, log *slog.Logger, listening func(addr string)) error {
	a, err := app.New(ctx, app.Config{RedisCluster: cc.RedisCluster, RedisURL: cc.RedisURL, DatabaseURL: cc.DatabaseURL,
		WebhookAllowNets: cc.WebhookAllowNets, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	a.Orders.SetAfterLine(func(op string, line int) {
		switch {
		case op == "place" && line+1 == cc.PauseOrderAfterLines:
			fmt.Println(orderPaused)
			select {}
		case op == "confirm" && line+1 == cc.PauseConfirmAfterLines:
			fmt.Println(confirmPaused)
			select {}
		}
	})
	return Serve(ctx, a, Config{Components: cc.Components, Listen: "127.0.0.1:0", Tokens: testTokens, DataDir: cc.DataDir,
		ReconcileInterval: cc.ReconcileInterval, ReclaimAfter: cc.ReclaimAfter,
		WebhookMinBackoff: childWebhookMinBackoff, WebhookMaxBackoff: childWebhookMaxBackoff, Export: cc.Export,
		OnListening: listening})
}

// The lines a paused child prints.
const orderPaused, confirmPaused = "ORDER-PAUSED", "CONFIRM-PAUSED"

// childReclaimAfter is the serve children's ReclaimAfter: a dead child's
// entries are taken over within seconds, not the default 30 s.
const childReclaimAfter = 3 * time.Second

// consumer returns the prefix of the process's projector consumer names
// (see projections.ConsumerName), once the process has started.
func (p *serveProcess) consumer(t *testing.T) string {
	t.Helper()
	name, err := projections.ConsumerName("", p.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return name + "-"
}

// serveProcess is a serve child process.
type serveProcess struct {
	*servechild.Process
	url     string
	dataDir string
}

// startServeProcess starts this test binary as a serve process over st's
// cluster and database, running components, and waits until it listens.
// The test's end kills it.
func startServeProcess(t *testing.T, st *stacktest.Stack, interval time.Duration, components ...string) *serveProcess {
	t.Helper()
	p := spawnServeProcess(t, st, interval, components...)
	p.waitListening(t)
	return p
}

// spawnServeProcess starts the process without waiting for it to listen.
func spawnServeProcess(t *testing.T, st *stacktest.Stack, interval time.Duration, components ...string) *serveProcess {
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

// spawnChild starts a serve process running c; its LISTENING, ERR,
// ORDER-PAUSED and CONFIRM-PAUSED lines arrive on its Lines.
func spawnChild(t *testing.T, c childConfig) *serveProcess {
	t.Helper()
	child, err := servechild.Start(childEnv, c, os.Stderr, orderPaused, confirmPaused)
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{Process: child, dataDir: c.DataDir}
	t.Cleanup(p.kill)
	return p
}

// waitListening waits for the process's LISTENING line.
func (p *serveProcess) waitListening(t *testing.T) {
	t.Helper()
	addr, err := p.WaitListening(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + addr
}

// kill ends the process with SIGKILL: no deferred call, no graceful stop.
func (p *serveProcess) kill() { p.Kill() }
