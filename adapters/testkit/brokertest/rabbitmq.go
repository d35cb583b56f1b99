package brokertest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RabbitMQConfig configures a private RabbitMQ node.
type RabbitMQConfig struct {
	// DiskFreeLimit, if set, is the node's disk_free_limit.absolute in
	// bytes: one above the disk's free space raises the disk alarm, which
	// blocks every publisher.
	DiskFreeLimit int64
}

// RabbitMQ is a private RabbitMQ node with its own epmd.
type RabbitMQ struct {
	t        testing.TB
	port     int
	dir      string
	logPath  string
	env      []string
	bin      string
	node, ep *proc
}

// The node's only user: RabbitMQ's guest may connect only from localhost
// anyway, but a user of the test's own keeps the machine's settings out.
const (
	RabbitUser     = "invledger"
	RabbitPassword = "test-secret"
)

// StartRabbitMQ starts a RabbitMQ node on free ports with its data, logs,
// HOME (the Erlang cookie) and configuration in t.TempDir(), and an epmd of
// its own on a free port, and stops both when the test ends. It calls
// /usr/lib/rabbitmq/bin/rabbitmq-server, not /usr/sbin's wrapper, which
// changes to /var/lib/rabbitmq and switches user.
func StartRabbitMQ(t testing.TB, cfg RabbitMQConfig) *RabbitMQ {
	t.Helper()
	r := startRabbitMQ(t, cfg)
	r.spawn()
	r.waitReady()
	return r
}

// startRabbitMQ prepares the node's directory and starts its epmd.
func startRabbitMQ(t testing.TB, cfg RabbitMQConfig) *RabbitMQ {
	t.Helper()
	skipShort(t)
	r := &RabbitMQ{t: t, port: freePort(t), dir: t.TempDir(),
		bin: lookPath(t, "rabbitmq-server", "rabbitmq-server", "/usr/lib/rabbitmq/bin/rabbitmq-server")}
	if r.bin != "/usr/lib/rabbitmq/bin/rabbitmq-server" {
		if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err == nil {
			r.bin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
		}
	}
	epmdPort, distPort := freePort(t), freePort(t)
	r.logPath = filepath.Join(r.dir, "rabbitmq.out")
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	conf := fmt.Sprintf(`listeners.tcp.default = 127.0.0.1:%d
default_user = %s
default_pass = %s
loopback_users = none
log.file.level = warning
log.console = false
`, r.port, RabbitUser, RabbitPassword)
	if cfg.DiskFreeLimit > 0 {
		conf += fmt.Sprintf("disk_free_limit.absolute = %d\n", cfg.DiskFreeLimit)
	}
	for name, content := range map[string]string{"rabbitmq.conf": conf, "rabbitmq-env.conf": "", "enabled_plugins": "[].\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(r.dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	r.env = append(envWithout("RABBITMQ_", "ERL_", "HOME="),
		"HOME="+home,
		"ERL_EPMD_PORT="+fmt.Sprint(epmdPort),
		"RABBITMQ_CONF_ENV_FILE="+filepath.Join(r.dir, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(r.dir, "rabbitmq.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(r.dir, "enabled_plugins"),
		"RABBITMQ_NODENAME=invledger-test-"+hex.EncodeToString(b)+"@localhost",
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+fmt.Sprint(r.port),
		"RABBITMQ_DIST_PORT="+fmt.Sprint(distPort),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(r.dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(r.dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(r.dir, "rabbitmq.pid"),
	)
	// The node's epmd runs as a child of the test, not daemonized by the
	// node, so it ends with the test instead of outliving the node.
	epmd := lookPath(t, "epmd", "erlang-base", "/usr/bin/epmd", "/usr/lib/erlang/bin/epmd")
	r.ep = start(t, "epmd", filepath.Join(r.dir, "epmd.log"), r.env, epmd, "-port", fmt.Sprint(epmdPort), "-address", "127.0.0.1")
	if err := waitUp(r.ep, filepath.Join(r.dir, "epmd.log"), func() error { return dialable(fmt.Sprintf("127.0.0.1:%d", epmdPort)) }); err != nil {
		t.Fatalf("brokertest: epmd did not start: %v", err)
	}
	t.Cleanup(func() {
		if r.node != nil {
			r.node.stop(syscall.SIGTERM, 30*time.Second)
		}
		r.ep.stop(syscall.SIGTERM, 5*time.Second)
	})
	return r
}

// StartRabbitMQAsync is StartRabbitMQ returning while the node boots,
// which takes seconds: ready waits for it, so a test prepares the rest
// meanwhile. Call ready from the test's goroutine.
func StartRabbitMQAsync(t testing.TB, cfg RabbitMQConfig) (_ *RabbitMQ, ready func()) {
	t.Helper()
	r := startRabbitMQ(t, cfg)
	r.spawn()
	return r, r.waitReady
}

// URL is the node's AMQP URL, with the test user's credentials.
func (r *RabbitMQ) URL() string {
	return fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/", RabbitUser, RabbitPassword, r.port)
}

// Start starts the node again on its ports and data, after Stop.
func (r *RabbitMQ) Start() {
	r.t.Helper()
	r.spawn()
	r.waitReady()
}

func (r *RabbitMQ) spawn() { r.node = start(r.t, "rabbitmq-server", r.logPath, r.env, r.bin) }

func (r *RabbitMQ) waitReady() {
	r.t.Helper()
	if err := waitUp(r.node, r.logPath, func() error {
		c, err := amqp.Dial(r.URL())
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		r.t.Fatalf("brokertest: rabbitmq-server did not start: %v", err)
	}
}

// Stop stops the node gracefully; its data stays for Start.
func (r *RabbitMQ) Stop() {
	r.node.stop(syscall.SIGTERM, 30*time.Second)
	r.node = nil
}

// Kill kills the node with SIGKILL, as a crash would; its data stays for
// Start, which recovers what it had confirmed.
func (r *RabbitMQ) Kill() {
	r.node.stop(syscall.SIGKILL, 10*time.Second)
	r.node = nil
}

// Freeze stops the node with SIGSTOP: its sockets stay open, and it
// answers nothing until Thaw.
func (r *RabbitMQ) Freeze() { r.node.signal(r.t, syscall.SIGSTOP) }

// Thaw resumes a frozen node.
func (r *RabbitMQ) Thaw() { r.node.signal(r.t, syscall.SIGCONT) }

// LogTail is the end of the node's output, for a failing test's message.
func (r *RabbitMQ) LogTail() string {
	b, _ := os.ReadFile(r.logPath)
	s := string(b)
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return strings.TrimSpace(s)
}

// SetDiskFreeLimit sets the node's disk_free_limit at run time with
// rabbitmqctl (e.g. "1000GB" raises the disk alarm on any test machine,
// "50MB" clears it).
func (r *RabbitMQ) SetDiskFreeLimit(limit string) {
	r.t.Helper()
	ctl := filepath.Join(filepath.Dir(r.bin), "rabbitmqctl")
	cmd := exec.Command(ctl, "set_disk_free_limit", limit)
	cmd.Env, cmd.Dir = r.env, r.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("brokertest: rabbitmqctl set_disk_free_limit %s: %v\n%s", limit, err, out)
	}
}

// WaitPublishBlocked waits until the node blocks publishers (an alarm is
// on): it publishes on a connection of its own until the node says so.
func (r *RabbitMQ) WaitPublishBlocked() {
	r.t.Helper()
	c, err := amqp.Dial(r.URL())
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = c.CloseDeadline(time.Now().Add(time.Second)) }()
	blocked := c.NotifyBlocked(make(chan amqp.Blocking, 1))
	ch, err := c.Channel()
	if err != nil {
		r.t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		_ = ch.Publish("", "brokertest-probe", false, false, amqp.Publishing{Body: []byte("probe")})
		select {
		case b := <-blocked:
			if b.Active {
				return
			}
		case <-deadline:
			r.t.Fatal("brokertest: the node did not block publishers within 30s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
