package brokertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// NATSConfig configures a private nats-server.
type NATSConfig struct {
	// User and Password, if set, are the only credentials the server takes.
	User, Password string
	// MaxFileStore bounds JetStream's file storage in bytes, to make it
	// full; 0 leaves the server's default.
	MaxFileStore int64
	// Current runs the nats-server that go.mod requires (2.12.1 or later:
	// it takes atomic batches) instead of the machine's (Debian's 2.9.10).
	Current bool
}

// NATS is a private nats-server with JetStream.
type NATS struct {
	t       testing.TB
	cfg     NATSConfig
	port    int
	dir     string
	logPath string
	bin     string
	p       *proc
}

// StartNATS starts `nats-server -js` on a free port with its store in
// t.TempDir(), and stops it when the test ends.
func StartNATS(t testing.TB, cfg NATSConfig) *NATS {
	t.Helper()
	skipShort(t)
	n := &NATS{t: t, cfg: cfg, port: freePort(t), dir: t.TempDir()}
	if cfg.Current {
		n.bin = currentNATSServer(t)
	} else {
		n.bin = lookPath(t, "nats-server", "nats-server", "/usr/bin/nats-server", "/usr/sbin/nats-server")
	}
	n.logPath = filepath.Join(n.dir, "nats.log")
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nserver_name: test_%d\njetstream {\n  store_dir: %q\n", n.port, n.port, filepath.Join(n.dir, "js"))
	if cfg.MaxFileStore > 0 {
		conf += "  max_file_store: " + strconv.FormatInt(cfg.MaxFileStore, 10) + "\n"
	}
	conf += "}\n"
	if cfg.User != "" {
		conf += fmt.Sprintf("authorization {\n  user: %q\n  password: %q\n}\n", cfg.User, cfg.Password)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Start()
	t.Cleanup(func() {
		if n.p != nil {
			n.p.stop(syscall.SIGTERM, 10*time.Second)
		}
	})
	return n
}

// URL is the server's URL, with the credentials when it has some.
func (n *NATS) URL() string {
	if n.cfg.User != "" {
		return fmt.Sprintf("nats://%s:%s@127.0.0.1:%d", n.cfg.User, n.cfg.Password, n.port)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", n.port)
}

// Addr is host:port.
func (n *NATS) Addr() string { return fmt.Sprintf("127.0.0.1:%d", n.port) }

// Start starts the server again on its port and store, after Stop.
func (n *NATS) Start() {
	n.t.Helper()
	n.p = start(n.t, "nats-server", n.logPath, nil, n.bin, "-c", filepath.Join(n.dir, "nats.conf"))
	if err := waitUp(n.p, n.logPath, func() error { return dialable(n.Addr()) }); err != nil {
		n.t.Fatalf("brokertest: nats-server did not start: %v", err)
	}
}

// Stop stops the server gracefully (SIGTERM); its store stays for Start.
func (n *NATS) Stop() {
	n.p.stop(syscall.SIGTERM, 10*time.Second)
	n.p = nil
}

// Freeze stops the server with SIGSTOP: its sockets stay open, and it
// answers nothing until Thaw.
func (n *NATS) Freeze() { n.p.signal(n.t, syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (n *NATS) Thaw() { n.p.signal(n.t, syscall.SIGCONT) }
