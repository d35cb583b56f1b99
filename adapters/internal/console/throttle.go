package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Sign-in throttle: a client address may get freeFailures tokens wrong;
// after that it waits before each further try, a second doubling with
// each failure up to maxWait, and is forgotten after forgetAfter without
// a failure.
const (
	freeFailures = 5
	maxWait      = time.Minute
	forgetAfter  = 15 * time.Minute
	// maxClients bounds the addresses remembered; when full, the one whose
	// last failure is oldest is forgotten first.
	maxClients = 10_000
)

// throttle slows repeated sign-in failures per client address. Memory is
// bounded by maxClients.
type throttle struct {
	mu      sync.Mutex
	clients map[string]*failures
	now     func() time.Time
}

type failures struct {
	n    int
	last time.Time
}

func newThrottle() *throttle {
	return &throttle{clients: map[string]*failures{}, now: time.Now}
}

// wait is how long client must still wait before its next try; 0: try now.
func (t *throttle) wait(client string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[client]
	if f == nil || f.n < freeFailures {
		return 0
	}
	return max(0, f.last.Add(backoff(f.n)).Sub(t.now()))
}

// backoff is the wait after n failures, n ≥ freeFailures.
func backoff(n int) time.Duration {
	if n-freeFailures >= 6 { // 2^6 s already exceeds maxWait
		return maxWait
	}
	return min(maxWait, time.Second<<(n-freeFailures))
}

// failed records a wrong token from client and returns its failures so far.
func (t *throttle) failed(client string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	f := t.clients[client]
	if f != nil && now.Sub(f.last) > forgetAfter {
		f.n = 0
	}
	if f == nil {
		if len(t.clients) >= maxClients {
			t.forgetOldest(now)
		}
		f = &failures{}
		t.clients[client] = f
	}
	f.n++
	f.last = now
	return f.n
}

// succeeded forgets client's failures.
func (t *throttle) succeeded(client string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, client)
}

// forgetOldest drops every client quiet for forgetAfter, or else the one
// quiet longest. Called with t.mu held, only when the map is full.
func (t *throttle) forgetOldest(now time.Time) {
	var oldest string
	for c, f := range t.clients {
		if now.Sub(f.last) > forgetAfter {
			delete(t.clients, c)
			continue
		}
		if oldest == "" || f.last.Before(t.clients[oldest].last) {
			oldest = c
		}
	}
	if len(t.clients) >= maxClients {
		delete(t.clients, oldest)
	}
}

// clientAddr is the request's TCP peer address, without the port: behind
// a proxy, the proxy's.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
