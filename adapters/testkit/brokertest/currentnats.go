package brokertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// natsServerModule is the module of the current nats-server, which go.mod
// requires (natsserver_tools.go keeps it there) so that tests exercise a
// server that takes atomic batches, where Debian's 2.9.10 does not.
const natsServerModule = "github.com/nats-io/nats-server/v2"

var current struct {
	once sync.Once
	bin  string
	err  error
}

// currentNATSServer returns a nats-server binary built, once per machine
// and version, from the version of natsServerModule that go.mod requires:
// the same server a Go test could embed, as a process that can be killed,
// stopped and restarted. scripts/install-deps.sh test (make test's
// deps-test) builds it beforehand into the user's cache directory; a test
// run without it builds it there once, in about 20 s.
func currentNATSServer(t testing.TB) string {
	t.Helper()
	current.once.Do(func() { current.bin, current.err = buildCurrentNATSServer() })
	if current.err != nil {
		t.Fatalf("brokertest: build the current nats-server: %v", current.err)
	}
	return current.bin
}

func buildCurrentNATSServer() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w (is it in go.mod?)", natsServerModule, err)
	}
	version := strings.TrimSpace(string(out))
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "invledger-brokertest")
	bin := filepath.Join(dir, "nats-server-"+version)
	if fi, err := os.Stat(bin); err == nil && !fi.IsDir() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside and renamed: test binaries of several packages may
	// build it at once.
	tmp, err := os.CreateTemp(dir, "build-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(), natsServerModule)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=") // a plain build, whatever flags the tests run with
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s@%s: %w\n%s", natsServerModule, version, err, b)
	}
	return bin, os.Rename(tmp.Name(), bin)
}
