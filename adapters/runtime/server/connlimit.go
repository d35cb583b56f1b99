package server

import (
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const refusalBody = `{"error":"unavailable","detail":"too many connections; retry later"}`

// refusal is the whole answer to a connection over the cap: a minimal
// HTTP/1.1 response, written before any request is read.
var refusal = []byte("HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(refusalBody)) + "\r\n" +
	"\r\n" + refusalBody)

// refusalDeadline bounds the whole refusal of one connection: the write,
// and the drain that keeps the client's unread request from turning the
// close into a reset that would discard the answer.
const refusalDeadline = time.Second

// maxRefusing bounds the connections being refused at once; beyond it a
// connection is closed without an answer, so a flood cannot hold more
// descriptors than the cap plus this.
const maxRefusing = 64

// limitListener caps the connections open at once. Accept never waits for
// a slot: a connection over the cap is answered 503 and closed, so a client
// holding idle connections cannot make the others queue.
type limitListener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refusing atomic.Int64
	refused  atomic.Int64 // since the last log line
	lastLog  atomic.Int64 // unix nanoseconds
	log      *slog.Logger
}

func newLimitListener(ln net.Listener, max int, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), log: log}
}

// Accept returns the next connection within the cap, refusing those over it.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &countedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// refuse answers c 503 and closes it, in the background.
func (l *limitListener) refuse(c net.Conn) {
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	l.logRefusal()
	go func() {
		defer l.refusing.Add(-1)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalDeadline))
		if _, err := c.Write(refusal); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				return
			}
		}
	}()
}

// logRefusal logs refused connections at most once a second, so a flood
// does not flood the log too.
func (l *limitListener) logRefusal() {
	n := l.refused.Add(1)
	now, last := time.Now().UnixNano(), l.lastLog.Load()
	if now-last < int64(time.Second) || !l.lastLog.CompareAndSwap(last, now) {
		return
	}
	l.refused.Add(-n)
	l.log.Warn("connections refused: too many open connections (is the reverse proxy in front pooling them?)",
		"refused", n, "max_conns", l.max)
}

// countedConn gives its slot back when closed, once however often Close is called.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// CloseWrite half-closes a TCP connection, as net/http does to deliver an
// error answer before it closes: the wrapper must not hide it.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
