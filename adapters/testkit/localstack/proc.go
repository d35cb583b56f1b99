package localstack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Pdeathsig is delivered when the *thread* that forked the child exits, not
// the process (golang/go#27505). Go may end an OS thread when a goroutine
// exits while locked to it, so children are forked from one goroutine locked
// to its thread for the life of the process: that thread never exits.
var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for req := range spawnReqs {
				req.res <- req.cmd.Start()
			}
		}()
	})
	res := make(chan error, 1)
	spawnReqs <- spawnReq{cmd: cmd, res: res}
	return <-res
}

// underShortTest reports whether this is a test binary run with -short. It
// looks the flag up rather than calling testing.Short, which panics outside
// a test binary, so that invledger's own binary does not link testing.
func underShortTest() bool {
	f := flag.Lookup("test.short")
	return f != nil && f.Value.String() == "true"
}

// proc is a running child process whose stdout and stderr go to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logOff  int64 // size of the log before this process started
	done    chan struct{}
	waitErr error // valid once done is closed
}

type procSpec struct {
	name    string // for messages, e.g. "redis-server"
	bin     string
	args    []string
	dir     string // working directory
	logPath string // stdout and stderr are appended here
	cred    *syscall.Credential
}

func startProc(s procSpec) (*proc, error) {
	if underShortTest() {
		panic("localstack: a test run with -short started " + s.name + ": `go test -short` (make check) starts no server, " +
			"so a test that needs one must skip first (localstacktest.SkipShort or ServerDir; its other helpers do)")
	}
	f, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localstack: open log for %s: %w", s.name, err)
	}
	defer f.Close() // the child has its own copy once started
	var off int64
	if fi, err := f.Stat(); err == nil {
		off = fi.Size()
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig:  syscall.SIGKILL,
		Credential: s.cred,
	}
	if err := spawn(cmd); err != nil {
		return nil, fmt.Errorf("localstack: start %s (%s): %w", s.name, s.bin, err)
	}
	p := &proc{name: s.name, cmd: cmd, logPath: s.logPath, logOff: off, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitError describes how the process ended; call only after done is closed.
func (p *proc) exitError() error {
	if p.waitErr == nil {
		return fmt.Errorf("%s exited with status 0", p.name)
	}
	return fmt.Errorf("%s exited: %v", p.name, p.waitErr)
}

func (p *proc) signal(sig syscall.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if err != nil && errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *proc) kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends sig and waits until the process exits. If ctx ends first it
// sends SIGKILL, waits, and returns an error wrapping ctx.Err().
func (p *proc) stop(ctx context.Context, sig syscall.Signal) error {
	if err := p.signal(sig); err != nil {
		p.kill()
		return fmt.Errorf("localstack: signal %s %v: %w", p.name, sig, err)
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.kill()
		return fmt.Errorf("localstack: %s did not exit after %v before the context ended, killed it with SIGKILL: %w",
			p.name, sig, ctx.Err())
	}
}

// withLog appends to err the output the process wrote to its log since it started.
func (p *proc) withLog(err error) error {
	return withLogTail(err, p.logPath, p.logOff)
}

const logTailBytes = 3000

func withLogTail(err error, path string, off int64) error {
	tail := readTail(path, off, logTailBytes)
	if tail == "" {
		return fmt.Errorf("%w\n(%s has no output from this run)", err, path)
	}
	return fmt.Errorf("%w\n--- last output in %s ---\n%s", err, path, tail)
}

// readTail returns at most max bytes from the end of path, not before off,
// starting at a line boundary.
func readTail(path string, off int64, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	start := off
	if fi.Size()-start > max {
		start = fi.Size() - max
	}
	if start < 0 || start > fi.Size() {
		start = 0
	}
	b, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return ""
	}
	s := string(b)
	if start > off {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return strings.TrimRight(s, "\n")
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localstack: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// procStat is the identity of a process from /proc: its pid and its start
// time, which tells a reused pid apart.
type procStat struct {
	pid   int
	start string
}

// readStat parses /proc/<pid>/stat into parent pid, state and start time.
func readStat(pid int) (ppid int, state byte, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, 0, "", false
	}
	f := strings.Fields(s[i+2:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return 0, 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0], f[19], true // f[19] is field 22 (starttime)
}

// childrenOf lists the live children of pid.
func childrenOf(pid int) []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range ents {
		cpid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, state, start, ok := readStat(cpid)
		if ok && ppid == pid && state != 'Z' && state != 'X' {
			out = append(out, procStat{pid: cpid, start: start})
		}
	}
	return out
}

// alive reports whether the process still runs (a zombie does not count).
func (s procStat) alive() bool {
	_, state, start, ok := readStat(s.pid)
	return ok && start == s.start && state != 'Z' && state != 'X'
}

// waitStopped waits up to max for pid to be in the stopped state.
func waitStopped(pid int, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		_, state, _, ok := readStat(pid)
		if !ok || state == 'T' || state == 'Z' || state == 'X' {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
