package projections_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/invledger/invledger/projections"
)

func TestConsumerNameIsStablePerDataDirAndUniqueAcrossThem(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dirA := filepath.Join(t.TempDir(), "a", "data") // created on first use
	dirB := filepath.Join(t.TempDir(), "b")

	first, err := projections.ConsumerName("", dirA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, host+"-") || len(first) <= len(host)+1 {
		t.Fatalf("name %q is not <host>-<instance id>", first)
	}
	// The same process instance restarting: the same name.
	again, err := projections.ConsumerName("", dirA)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("restart on the same data dir gave %q, then %q", first, again)
	}
	// Another process on the same host, with its own data dir: another name.
	other, err := projections.ConsumerName("", dirB)
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Fatalf("two data dirs on one host share the consumer name %q", first)
	}
	// An explicit name wins.
	if got, err := projections.ConsumerName("projector-7", dirA); err != nil || got != "projector-7" {
		t.Fatalf("explicit name: got %q, %v", got, err)
	}
	if _, err := projections.ConsumerName("", ""); err == nil {
		t.Fatal("no name and no data dir was accepted")
	}
}

func TestConsumerNameCreatedConcurrentlyIsAgreedOn(t *testing.T) {
	dir := t.TempDir()
	names := make([]string, 8)
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			name, err := projections.ConsumerName("", dir)
			if err != nil {
				t.Error(err)
			}
			names[i] = name
		})
	}
	wg.Wait()
	for _, n := range names[1:] {
		if n != names[0] {
			t.Fatalf("concurrent first uses of one data dir gave different names: %v", names)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("data dir holds %d files, want only %s", len(entries), projections.InstanceIDFile)
	}
}

// TestClaimConsumerNameRefusesASecondLiveProcess: two processes on one data
// dir would share a consumer name and take each other's pending entries as
// their own; the second is refused until the first releases the dir.
func TestClaimConsumerNameRefusesASecondLiveProcess(t *testing.T) {
	dir := t.TempDir()
	name, release, err := projections.ClaimConsumerName("", dir)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to an open file, so a second claim in this process
	// is refused just as another process's would be.
	if _, _, err := projections.ClaimConsumerName("", dir); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second claim of %s: %v, want refused", dir, err)
	}
	// An explicit name is the operator's to keep unique.
	if n, rel, err := projections.ClaimConsumerName("explicit", dir); err != nil || n != "explicit" {
		t.Fatalf("explicit name: %q %v", n, err)
	} else {
		rel()
	}
	release()
	again, release2, err := projections.ClaimConsumerName("", dir)
	if err != nil || again != name {
		t.Fatalf("after release: %q %v, want %q", again, err, name)
	}
	release2()
}
