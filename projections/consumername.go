package projections

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// InstanceIDFile is the file, under a data dir, that keeps the instance id
// ConsumerName appends to the host name.
const InstanceIDFile = "consumer-instance-id"

// ConsumerName returns the consumer name for this process: explicit if it
// is not empty, else "<host name>-<instance id>", where the instance id is
// read from dataDir/InstanceIDFile, which is created (with dataDir) on
// first use. The name is stable across restarts of a process that keeps
// its data dir, so a restart takes back its own pending entries, and
// distinct for two processes on one host with different data dirs. Two
// live processes must not share a data dir (or an explicit name): they
// would read each other's pending entries as their own.
func ConsumerName(explicit, dataDir string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if dataDir == "" {
		return "", errors.New("redisbatch: consumer name: neither a name nor a data dir is set")
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	id, err := instanceID(dataDir)
	if err != nil {
		return "", err
	}
	return host + "-" + id, nil
}

// instanceID reads the instance id under dataDir, creating it if missing.
// The file is written aside and linked into place, so two processes
// starting together on one new dir agree on one id and never read a
// half-written file.
func instanceID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, InstanceIDFile)
	if id, err := readInstanceID(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return id, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	tmp, err := os.CreateTemp(dataDir, InstanceIDFile+".*")
	if err != nil {
		return "", fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if err = errors.Join(err, tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("redisbatch: consumer name: write instance id: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	return readInstanceID(path)
}

func readInstanceID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("redisbatch: consumer name: %s is empty", path)
	}
	return id, nil
}

// LockFile is the file, under a data dir, that ClaimConsumerName locks.
const LockFile = "consumer.lock"

// ClaimConsumerName is ConsumerName for a process that will use the name
// until release is called: when the name comes from dataDir, it also takes
// an exclusive lock on dataDir/LockFile (flock, released by release or
// when the process dies, kill -9 included), so a second live process on
// the same data dir is refused instead of sharing the name. An explicit
// name is not locked: whoever sets it owns its uniqueness.
func ClaimConsumerName(explicit, dataDir string) (name string, release func(), err error) {
	name, err = ConsumerName(explicit, dataDir)
	if err != nil || explicit != "" {
		return name, func() {}, err
	}
	f, err := os.OpenFile(filepath.Join(dataDir, LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return "", nil, fmt.Errorf("redisbatch: data dir %s is in use by another process (pid %s): give each process its own data dir or consumer name",
				dataDir, strings.TrimSpace(string(holder)))
		}
		return "", nil, fmt.Errorf("redisbatch: consumer name: lock %s: %w", f.Name(), err)
	}
	// The pid is only for the message above; the lock is what counts.
	if err := errors.Join(f.Truncate(0), writeAt0(f, fmt.Sprintln(os.Getpid()))); err != nil {
		_ = f.Close()
		return "", nil, fmt.Errorf("redisbatch: consumer name: %w", err)
	}
	return name, func() { _ = f.Close() }, nil
}

func writeAt0(f *os.File, s string) error {
	_, err := f.WriteAt([]byte(s), 0)
	return err
}
