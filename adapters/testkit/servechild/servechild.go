// Package servechild runs a serve process as a child of a test binary, so
// that a test can kill -9 it and start it again: the test starts its own
// binary with a JSON configuration in an environment variable, the
// binary's TestMain hands over to Main instead of running the tests, and
// the child prints LISTENING <addr> once it serves, or ERR <error>.
//
//	func TestMain(m *testing.M) {
//		if code, child := servechild.Main(childEnv, serveChild); child {
//			os.Exit(code)
//		}
//		localstacktest.Main(m)
//	}
package servechild

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Serve runs a child's server over cfg until ctx ends (SIGTERM), calling
// listening with its address once it accepts connections.
type Serve[C any] func(ctx context.Context, cfg C, log *slog.Logger, listening func(addr string)) error

// Main is a child's whole life when env is set: it decodes env's JSON into
// a C, runs serve until SIGTERM, logging warnings to stderr, and returns
// the exit status, with child true. When env is not set the binary is the
// test binary itself: child is false.
func Main[C any](env string, serve Serve[C]) (code int, child bool) {
	raw := os.Getenv(env)
	if raw == "" {
		return 0, false
	}
	var cfg C
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Println("ERR", env, err)
		return 1, true
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := serve(ctx, cfg, log, func(addr string) { fmt.Println("LISTENING", addr) }); err != nil {
		fmt.Println("ERR", err)
		return 1, true
	}
	return 0, true
}

// Process is a child started by Start.
type Process struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// Start starts this test binary as a child whose env holds cfg as JSON,
// its stderr going to stderr. Its LISTENING and ERR lines, and those
// equal to one of marks (a child's own signals, such as a pause), arrive
// on Lines. The child is killed if the test binary dies.
func Start(env string, cfg any, stderr io.Writer, marks ...string) (*Process, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "LISTENING ") || strings.HasPrefix(line, "ERR") || slices.Contains(marks, line) {
				select {
				case p.lines <- line:
				default: // nobody waits for this many: the reader must not block the child's exit
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Lines are the child's LISTENING, ERR and marked lines.
func (p *Process) Lines() <-chan string { return p.lines }

// WaitListening waits up to timeout for the child's LISTENING line and
// returns the address it serves; an ERR line, an exit first or the
// timeout is an error, and the child is killed.
func (p *Process) WaitListening(timeout time.Duration) (addr string, err error) {
	select {
	case line := <-p.lines:
		if addr, ok := strings.CutPrefix(line, "LISTENING "); ok {
			return addr, nil
		}
		err = fmt.Errorf("serve child: %s", line)
	case <-p.done:
		err = errors.New("serve child exited before listening")
	case <-time.After(timeout):
		err = fmt.Errorf("serve child did not listen within %s", timeout)
	}
	p.Kill()
	return "", err
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill ends the child with SIGKILL (no deferred call, no graceful stop),
// waits until it is gone, and returns its pid.
func (p *Process) Kill() int {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return p.Pid()
}
