// Package brokertest starts private message brokers for tests: a
// nats-server with JetStream and a RabbitMQ node, each on free ports of
// 127.0.0.1 in the test's temporary directory, never the machine's own
// services (nats :4222, rabbitmq :5672), and stopped with everything they
// started when the test ends.
package brokertest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// startTimeout bounds a broker's start: RabbitMQ takes about 8 s on an
// idle machine, much more beside a race-detector build.
const startTimeout = 90 * time.Second

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("brokertest: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a broker process, in a process group of its own so that what it
// forks dies with it.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(t testing.TB, name, logPath string, env []string, bin string, args ...string) *proc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("brokertest: %s log: %v", name, err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = filepath.Dir(logPath)
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("brokertest: start %s (%s): %v", name, bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p
}

// stop sends sig to the process group and waits for the process, killing
// the group after timeout.
func (p *proc) stop(sig syscall.Signal, timeout time.Duration) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	// What the group still runs (an orphaned helper) goes too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// signal sends sig to the process group: SIGSTOP freezes a broker as a
// stalled host would, without closing its sockets; SIGCONT thaws it.
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		t.Fatalf("brokertest: signal %v: %v", sig, err)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitUp polls ready until it succeeds, the process exits or
// startTimeout passes; its failure carries the end of the log.
func waitUp(p *proc, logPath string, ready func() error) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if p.exited() || time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			return fmt.Errorf("%w\n--- %s ---\n%s", err, logPath, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialable reports whether addr accepts TCP connections.
func dialable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

func lookPath(t testing.TB, bin, pkg string, alternatives ...string) string {
	t.Helper()
	if p, err := exec.LookPath(bin); err == nil {
		return p
	}
	for _, a := range alternatives {
		if fi, err := os.Stat(a); err == nil && !fi.IsDir() {
			return a
		}
	}
	t.Fatalf("brokertest: %s not found: install it (Debian: apt-get install %s; scripts/install-deps.sh does)", bin, pkg)
	return ""
}

// envWithout returns the process environment without the variables of prefixes.
func envWithout(prefixes ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// skipShort skips under -short: every test here is an integration test.
func skipShort(t testing.TB) { t.Helper(); localstacktest.SkipShort(t) }
