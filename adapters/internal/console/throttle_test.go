package console

import (
	"fmt"
	"testing"
	"time"
)

// TestThrottleBacksOffAndForgets: five free failures, then a wait that
// doubles up to a minute; a success or 15 quiet minutes forget them, and
// the addresses remembered stay within maxClients.
func TestThrottleBacksOffAndForgets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	th := newThrottle()
	th.now = func() time.Time { return now }
	for range freeFailures {
		if w := th.wait("a"); w != 0 {
			t.Fatalf("wait before the free failures are spent = %v", w)
		}
		th.failed("a")
	}
	if w := th.wait("a"); w != time.Second {
		t.Fatalf("wait after %d failures = %v, want 1s", freeFailures, w)
	}
	th.failed("a")
	if w := th.wait("a"); w != 2*time.Second {
		t.Fatalf("wait after %d failures = %v, want 2s", freeFailures+1, w)
	}
	for range 20 {
		th.failed("a")
	}
	if w := th.wait("a"); w != maxWait {
		t.Fatalf("wait after many failures = %v, want %v", w, maxWait)
	}
	if w := th.wait("b"); w != 0 {
		t.Fatalf("another address waits %v", w)
	}
	now = now.Add(maxWait)
	if w := th.wait("a"); w != 0 {
		t.Fatalf("after the wait, still %v", w)
	}
	now = now.Add(forgetAfter + time.Second)
	if n := th.failed("a"); n != 1 {
		t.Fatalf("a failure after 15 quiet minutes is number %d, want 1", n)
	}
	th.succeeded("a")
	if _, ok := th.clients["a"]; ok {
		t.Fatal("a success did not forget the failures")
	}
	for i := range maxClients + 10 {
		th.failed(fmt.Sprint("c", i))
	}
	if len(th.clients) > maxClients {
		t.Fatalf("%d addresses remembered, more than %d", len(th.clients), maxClients)
	}
}
