package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// The http target's purchases go through this minimal HTTP/1.1 keep-alive
// client instead of net/http's: one connection per simulated client,
// requests written from a prepared prefix, answers read with one buffered
// reader. On a 2-core machine the load generator competes with the server
// for CPU, and net/http's client (two goroutines and a header map per
// connection and request) cost about as much as the server it measured.
// redis-benchmark, the ceiling, is as lean; this keeps the comparison fair.

// fastHTTP holds what every deduct request shares.
type fastHTTP struct {
	addr   string // host:port
	prefix []byte // request line and headers up to "Content-Length: "
}

func newFastHTTP(host, path, authorization string) *fastHTTP {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\nContent-Type: application/json\r\nContent-Length: ", path, host, authorization)
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(host, "80")
	}
	return &fastHTTP{addr: addr, prefix: b.Bytes()}
}

// fastConn is one client's connection.
type fastConn struct {
	c   net.Conn
	br  *bufio.Reader
	out []byte
}

func (f *fastConn) Close() error { return f.c.Close() }

var errConnClosed = errors.New("the server closed the connection")

// post sends body and returns the status and the response body, which is
// valid until the next call. A connection that fails is closed, and the next
// call dials a new one.
func (h *fastHTTP) post(ctx context.Context, w *benchWorker, body []byte) (int, []byte, error) {
	fc, _ := w.conn.(*fastConn)
	if fc == nil {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", h.addr)
		if err != nil {
			return 0, nil, err
		}
		fc = &fastConn{c: c, br: bufio.NewReaderSize(c, 4096), out: make([]byte, 0, 512)}
		w.conn = fc
	}
	status, resp, keep, err := fc.roundTrip(ctx, h.prefix, body)
	if err != nil || !keep {
		_ = fc.Close()
		w.conn = nil
	}
	return status, resp, err
}

var longAgo = time.Unix(1, 0)

func (f *fastConn) roundTrip(ctx context.Context, prefix, body []byte) (status int, resp []byte, keep bool, err error) {
	if d, ok := ctx.Deadline(); ok {
		_ = f.c.SetDeadline(d)
	} else {
		_ = f.c.SetDeadline(time.Time{})
	}
	// Cancellation (the end of --drain) interrupts a blocked read.
	stop := context.AfterFunc(ctx, func() { _ = f.c.SetDeadline(longAgo) })
	defer func() {
		if !stop() && err != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
	}()
	out := append(f.out[:0], prefix...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	out = append(out, body...)
	f.out = out
	if _, err := f.c.Write(out); err != nil {
		return 0, nil, false, err
	}
	line, err := f.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errConnClosed
		}
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, fmt.Errorf("malformed status line %q", line)
	}
	length, keep := -1, line[7] == '1' // HTTP/1.1 keeps the connection by default
	for {
		h, err := f.br.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		name, value, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, fmt.Errorf("malformed header %q", h)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, nil, false, fmt.Errorf("malformed Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			keep = false
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, nil, false, fmt.Errorf("unexpected Transfer-Encoding %q for a small answer", value)
		}
	}
	if length < 0 {
		return 0, nil, false, errors.New("answer without Content-Length")
	}
	if length > 1<<20 {
		return 0, nil, false, fmt.Errorf("answer of %d bytes is too large", length)
	}
	if cap(f.out) < length {
		f.out = make([]byte, length)
	}
	resp = f.out[:length]
	if _, err := io.ReadFull(f.br, resp); err != nil {
		return 0, nil, false, err
	}
	return status, resp, keep, nil
}
