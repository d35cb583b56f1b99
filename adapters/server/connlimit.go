package server

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const refusalBody = `{"error":"unavailable","detail":"too many connections; retry later"}`

// refusalDeadline bounds the whole refusal of one connection: reading its
// request and writing the answer.
const refusalDeadline = time.Second

// probeDeadline bounds a health probe answered over the cap: /readyz pings
// the dependencies.
const probeDeadline = 5 * time.Second

// maxRefusing bounds the connections being refused at once; beyond it a
// connection is closed without an answer, so a flood cannot hold more
// descriptors than the cap plus this.
const maxRefusing = 64

// newConnAge is how long a connection may stay silent before a new one may
// take its place when the server is full: honest clients send their
// request at once.
const newConnAge = time.Second

// limitListener caps the connections open at once, in all and, when
// perClient is set, from one client address (the TCP peer's IP). Accept
// never waits for a slot: when full, it closes an evictable connection (a
// keep-alive one between requests, or one that has sent nothing for
// newConnAge) to make room, taking it from the address that holds the most
// connections, and of those the longest idle; so idle and slow connections
// hold no one's turn, and a client whose connections are busy is served up
// to the cap. When every connection is busy, the new one is refused. A
// refused connection is still answered /healthz and /readyz by the
// overflow server, and 503 with Retry-After for anything else.
type limitListener struct {
	net.Listener
	max, perClient int
	log            *slog.Logger

	mu       sync.Mutex
	open     int
	byClient map[string]int
	// evictable holds the idle and not-yet-speaking connections, oldest
	// first: the ones a new connection may replace.
	evictable *list.List

	overflow *http.Server
	refused  chan net.Conn
	done     chan struct{}
	closing  sync.Once
	refusing atomic.Int64
	dropped  atomic.Int64 // refused since the last log line
	lastLog  atomic.Int64 // unix nanoseconds
}

// newLimitListener caps ln at max connections, and at perClient from one
// address unless perClient is 0; handler answers the health probes of
// refused connections.
func newLimitListener(ln net.Listener, max, perClient int, handler http.Handler, log *slog.Logger) *limitListener {
	l := &limitListener{Listener: ln, max: max, perClient: perClient, log: log, byClient: map[string]int{},
		evictable: list.New(), refused: make(chan net.Conn, maxRefusing), done: make(chan struct{})}
	l.overflow = &http.Server{
		Handler:           overflowHandler(handler),
		ReadHeaderTimeout: refusalDeadline,
		WriteTimeout:      probeDeadline,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	l.overflow.SetKeepAlivesEnabled(false)
	go func() { _ = l.overflow.Serve(overflowListener{l}) }()
	return l
}

// overflowHandler answers the health probes as the API does and every other
// request 503: the API is full, but the process is alive and can say
// whether it is ready.
func overflowHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz") {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Length", strconv.Itoa(len(refusalBody)))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(refusalBody))
	})
}

// Accept returns the next connection within the caps, refusing those over them.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if cc := l.admit(c); cc != nil {
			return cc, nil
		}
		l.refuse(c)
	}
}

// admit counts c in, making room by evicting one connection if needed;
// nil means c is over a cap and nothing could be evicted.
func (l *limitListener) admit(c net.Conn) *countedConn {
	client := peerIP(c)
	l.mu.Lock()
	var victim *countedConn
	overClient := l.perClient > 0 && l.byClient[client] >= l.perClient
	switch {
	case overClient:
		victim = l.evictableOf(client)
	case l.open >= l.max:
		victim = l.evictableOfLargest()
	}
	if (overClient || l.open >= l.max) && victim == nil {
		l.mu.Unlock()
		return nil
	}
	if victim != nil {
		l.releaseLocked(victim)
	}
	cc := &countedConn{Conn: c, l: l, client: client, since: time.Now()}
	l.open++
	l.byClient[client]++
	cc.elem = l.evictable.PushBack(cc)
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
	}
	return cc
}

// evictableOf is client's connection idle the longest or silent for over
// newConnAge; nil if none. Called with l.mu held.
func (l *limitListener) evictableOf(client string) *countedConn {
	for e := l.evictable.Front(); e != nil; e = e.Next() {
		if cc := e.Value.(*countedConn); cc.client == client && cc.canEvict() {
			return cc
		}
	}
	return nil
}

// evictableOfLargest is, among the evictable connections, one of the
// address holding the most connections, busy ones included, and of those
// the one idle the longest; nil if none. The address that takes the most
// places gives one back first, but only from those it does not use. One
// pass over the evictable, at most max. Called with l.mu held.
func (l *limitListener) evictableOfLargest() *countedConn {
	var victim *countedConn
	for e := l.evictable.Front(); e != nil; e = e.Next() {
		cc := e.Value.(*countedConn)
		if cc.canEvict() && (victim == nil || l.byClient[cc.client] > l.byClient[victim.client]) {
			victim = cc
		}
	}
	return victim
}

// releaseLocked gives cc's slot back, once. Called with l.mu held.
func (l *limitListener) releaseLocked(cc *countedConn) {
	if cc.released {
		return
	}
	cc.released = true
	l.open--
	if l.byClient[cc.client]--; l.byClient[cc.client] <= 0 {
		delete(l.byClient, cc.client)
	}
	if cc.elem != nil {
		l.evictable.Remove(cc.elem)
		cc.elem = nil
	}
}

// connState is the API server's ConnState hook: a connection between
// requests may be evicted, one serving a request may not.
func (l *limitListener) connState(c net.Conn, s http.ConnState) {
	cc, ok := c.(*countedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cc.released {
		return
	}
	switch s {
	case http.StateIdle:
		if cc.elem != nil {
			l.evictable.Remove(cc.elem)
		}
		cc.idle = true
		cc.elem = l.evictable.PushBack(cc)
	case http.StateActive, http.StateHijacked:
		if cc.elem != nil {
			l.evictable.Remove(cc.elem)
			cc.elem = nil
		}
		cc.idle = false
	}
}

// refuse hands c to the overflow server, in the background.
func (l *limitListener) refuse(c net.Conn) {
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	l.logRefusal()
	_ = c.SetDeadline(time.Now().Add(probeDeadline))
	select {
	case l.refused <- &refusedConn{Conn: c, release: func() { l.refusing.Add(-1) }}:
	case <-l.done:
		l.refusing.Add(-1)
		_ = c.Close()
	}
}

// Close stops accepting and ends the overflow server.
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closing.Do(func() {
		close(l.done)
		ctx, cancel := context.WithTimeout(context.Background(), probeDeadline)
		defer cancel()
		_ = l.overflow.Shutdown(ctx)
	})
	return err
}

// logRefusal logs refused connections at most once a second, so a flood
// does not flood the log too.
func (l *limitListener) logRefusal() {
	n := l.dropped.Add(1)
	now, last := time.Now().UnixNano(), l.lastLog.Load()
	if now-last < int64(time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.dropped.Add(-n)
	l.log.Warn("connections refused: every connection is busy, in all or, with a per-client cap, from one client address",
		"refused", n, "max_conns", l.max, "max_conns_per_client", l.perClient)
}

// peerIP is the client address a connection counts against.
func peerIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// overflowListener feeds the refused connections to the overflow server.
type overflowListener struct{ l *limitListener }

func (o overflowListener) Accept() (net.Conn, error) {
	select {
	case c := <-o.l.refused:
		return c, nil
	case <-o.l.done:
		return nil, net.ErrClosed
	}
}
func (o overflowListener) Close() error   { return nil }
func (o overflowListener) Addr() net.Addr { return o.l.Addr() }

// countedConn holds one slot of the limit until closed. Its fields but
// Conn are guarded by l.mu.
type countedConn struct {
	net.Conn
	l        *limitListener
	client   string
	since    time.Time
	idle     bool
	released bool
	elem     *list.Element
}

// canEvict reports whether c may be closed to admit another: it is
// between requests, or has sent nothing for newConnAge. Called with l.mu
// held.
func (c *countedConn) canEvict() bool {
	return c.idle || time.Since(c.since) > newConnAge
}

// CloseWrite half-closes a TCP connection, as net/http does to deliver an
// error answer before it closes: the wrapper must not hide it.
func (c *countedConn) CloseWrite() error { return closeWrite(c.Conn) }

func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and gives its slot back, once however often
// it is called.
func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}

// refusedConn gives its place among the refusing back when closed, once.
type refusedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *refusedConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c *refusedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
