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

// maxRefusing bounds the connections being refused at once, so a flood
// cannot hold more descriptors than the cap plus this; beyond it a refused
// connection takes the place of one still sending its request, as in the
// API, or is closed without an answer.
const maxRefusing = 64

// fullReadTimeout is how long a connection may take to send a request,
// headers or body, while its pool is full or was within this long: honest
// clients send theirs at once, and a slow one holds a place someone else
// is refused.
const fullReadTimeout = time.Second

// limitListener caps the connections open at once, in all and, when
// perClient is set, from one client address (the TCP peer's IP). Accept
// never waits for a place: when full, it closes an evictable connection (a
// keep-alive one between requests, or one whose request has not reached a
// handler, its headers not yet complete) to make room, taking it from the
// address that holds the most connections, and of those the one evictable
// the longest; so idle connections and slowly sent headers hold no one's
// turn, and a client whose connections are busy is served up to the cap.
// When every connection is busy, the new one is refused. A refused
// connection is answered /healthz and /readyz by the overflow server, and
// 503 with Retry-After for anything else; the refused connections are
// capped and evicted the same way, so a flood of slow ones from one
// address cannot keep a probe from another from its answer.
type limitListener struct {
	net.Listener
	log *slog.Logger

	api, refusing *pool

	overflow *http.Server
	refused  chan net.Conn
	done     chan struct{}
	closing  sync.Once
	dropped  atomic.Int64 // refused since the last log line
	lastLog  atomic.Int64 // unix nanoseconds
}

// newLimitListener caps ln at max connections, and at perClient from one
// address unless perClient is 0; handler answers the health probes of
// refused connections. The API's server takes its Handler, ConnContext and
// ConnState from serveWithin.
func newLimitListener(ln net.Listener, max, perClient int, handler http.Handler, log *slog.Logger) *limitListener {
	l := &limitListener{Listener: ln, log: log, api: newPool(max, perClient), refusing: newPool(maxRefusing, 0),
		refused: make(chan net.Conn, maxRefusing), done: make(chan struct{})}
	l.overflow = &http.Server{
		Handler:           overflowHandler(handler),
		ReadHeaderTimeout: refusalDeadline,
		WriteTimeout:      probeDeadline,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	serveWithin(l.overflow)
	l.overflow.SetKeepAlivesEnabled(false)
	go func() { _ = l.overflow.Serve(overflowListener{l}) }()
	return l
}

// serveWithin makes srv, before it serves, report to the pools of the
// connections it serves: a connection is busy, and no longer evictable,
// once its request reaches srv's handler, its headers complete, and
// evictable again between requests. Not net/http's StateActive, which its
// documentation allows from a request's first byte.
func serveWithin(srv *http.Server) {
	h := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cc, ok := r.Context().Value(countedConnKey{}).(*countedConn); ok {
			cc.p.busy(cc)
		}
		h.ServeHTTP(w, r)
	})
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, countedConnKey{}, c)
	}
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if cc, ok := c.(*countedConn); ok && s == http.StateIdle {
			cc.p.idle(cc)
		}
	}
}

// countedConnKey holds a request's *countedConn in its context.
type countedConnKey struct{}

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
		if cc := l.api.admit(c); cc != nil {
			return cc, nil
		}
		l.refuse(c)
	}
}

// refuse hands c to the overflow server, in the background.
func (l *limitListener) refuse(c net.Conn) {
	l.logRefusal()
	cc := l.refusing.admit(c)
	if cc == nil {
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Now().Add(probeDeadline))
	select {
	case l.refused <- cc:
	case <-l.done:
		_ = cc.Close()
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
		"refused", n, "max_conns", l.api.max, "max_conns_per_client", l.api.perClient)
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

// pool holds the places of max connections, perClient at most from one
// address unless perClient is 0. A connection is evictable, its place
// open to a newcomer when the pool is full, until its request reaches a
// handler, and again between requests.
type pool struct {
	max, perClient int

	mu       sync.Mutex
	open     int
	byClient map[string]int
	// evictable holds the connections a newcomer may replace, in the
	// order they became evictable.
	evictable *list.List
	// reading holds the connections with a read deadline for a request,
	// headers or body, which fullReadTimeout clamps.
	reading map[*countedConn]struct{}
	// fullAt is when a newcomer last found the pool full.
	fullAt time.Time
}

func newPool(max, perClient int) *pool {
	return &pool{max: max, perClient: perClient, byClient: map[string]int{}, evictable: list.New(), reading: map[*countedConn]struct{}{}}
}

// admit counts c in, making room by evicting one connection if needed;
// nil means c is over a cap and nothing could be evicted.
func (p *pool) admit(c net.Conn) *countedConn {
	client := peerIP(c)
	p.mu.Lock()
	var victim *countedConn
	overClient := p.perClient > 0 && p.byClient[client] >= p.perClient
	if overClient || p.open >= p.max {
		// A client at its own cap takes no one else's place: only a
		// full pool hurries the requests being read.
		if p.open >= p.max {
			p.noteFullLocked()
		}
		if overClient {
			victim = p.evictableOf(client)
		} else {
			victim = p.evictableOfLargest()
		}
		if victim == nil {
			p.mu.Unlock()
			return nil
		}
		p.releaseLocked(victim)
	}
	cc := &countedConn{Conn: c, p: p, client: client}
	p.open++
	p.byClient[client]++
	cc.elem = p.evictable.PushBack(cc)
	p.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
	}
	return cc
}

// noteFullLocked records that a newcomer found the pool full. When it had
// not been for fullReadTimeout, the deadlines already set for requests
// being read are shortened too: net/http set them before the pool filled.
// Called with p.mu held.
func (p *pool) noteFullLocked() {
	now := time.Now()
	if now.Sub(p.fullAt) > fullReadTimeout {
		for cc := range p.reading {
			_ = cc.Conn.SetReadDeadline(clampRead(cc.want, cc.wantAt))
		}
	}
	p.fullAt = now
}

// clampRead is the read deadline want, set at at, when the pool is full.
func clampRead(want, at time.Time) time.Time {
	if short := at.Add(fullReadTimeout); short.Before(want) {
		return short
	}
	return want
}

// evictableOf is client's connection evictable the longest; nil if none.
// Called with p.mu held.
func (p *pool) evictableOf(client string) *countedConn {
	for e := p.evictable.Front(); e != nil; e = e.Next() {
		if cc := e.Value.(*countedConn); cc.client == client {
			return cc
		}
	}
	return nil
}

// evictableOfLargest is, among the evictable connections, one of the
// address holding the most connections, busy ones included, and of those
// the one evictable the longest; nil if none. The address that takes the
// most places gives one back first, but only from those it does not use.
// One pass over the evictable, at most max. Called with p.mu held.
func (p *pool) evictableOfLargest() *countedConn {
	var victim *countedConn
	for e := p.evictable.Front(); e != nil; e = e.Next() {
		cc := e.Value.(*countedConn)
		if victim == nil || p.byClient[cc.client] > p.byClient[victim.client] {
			victim = cc
		}
	}
	return victim
}

// releaseLocked gives cc's place back, once. Called with p.mu held.
func (p *pool) releaseLocked(cc *countedConn) {
	if cc.released {
		return
	}
	cc.released = true
	p.open--
	if p.byClient[cc.client]--; p.byClient[cc.client] <= 0 {
		delete(p.byClient, cc.client)
	}
	p.setEvictableLocked(cc, false)
	delete(p.reading, cc)
}

// busy marks cc as serving a request: it is no longer evictable.
func (p *pool) busy(cc *countedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cc.idle = false
	p.setEvictableLocked(cc, false)
}

// idle marks cc as between requests: evictable, and the read deadlines
// net/http sets for its wait (the idle timeout, then the next request's
// headers) are its own.
func (p *pool) idle(cc *countedConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cc.idle = true
	delete(p.reading, cc)
	p.setEvictableLocked(cc, true)
}

// setEvictableLocked moves cc to the back of the evictable or out of it.
// Called with p.mu held.
func (p *pool) setEvictableLocked(cc *countedConn, evictable bool) {
	if cc.elem != nil {
		p.evictable.Remove(cc.elem)
		cc.elem = nil
	}
	if evictable && !cc.released {
		cc.elem = p.evictable.PushBack(cc)
	}
}

// countedConn holds one place of its pool until closed. Its fields but
// Conn and p are guarded by p.mu.
type countedConn struct {
	net.Conn
	p        *pool
	client   string
	idle     bool
	released bool
	elem     *list.Element
	// want is the read deadline net/http set, at wantAt.
	want, wantAt time.Time
}

// SetReadDeadline sets the deadline net/http asks for, but no later than
// fullReadTimeout away while the pool is full and the connection is
// reading a request (its headers before its first, or a body): net/http
// sets a new deadline for every request, so the wrapper is where a full
// pool can shorten it. A zero deadline (net/http's read in the background
// once the body is in) and the deadlines of a connection between requests
// are left alone.
func (c *countedConn) SetReadDeadline(t time.Time) error {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	c.want, c.wantAt = t, now
	if t.IsZero() || c.idle || c.released {
		delete(p.reading, c)
		return c.Conn.SetReadDeadline(t)
	}
	p.reading[c] = struct{}{}
	if now.Sub(p.fullAt) <= fullReadTimeout {
		t = clampRead(t, now)
	}
	return c.Conn.SetReadDeadline(t)
}

// CloseWrite half-closes a TCP connection, as net/http does to deliver an
// error answer before it closes: the wrapper must not hide it.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection and gives its place back, once however often
// it is called.
func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.p.mu.Lock()
	c.p.releaseLocked(c)
	c.p.mu.Unlock()
	return err
}
