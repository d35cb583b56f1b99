package server

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// aLongTimeAgo is a read deadline already passed: the read fails at once.
var aLongTimeAgo = time.Unix(1, 0)

// guardBodies bounds what a request body may cost a connection slot. A
// body must arrive within bodyTimeout of its headers; once it has,
// net/http lifts the read deadline for its background read, which notices
// a client gone, so a handler may work past bodyTimeout. An answer written
// before the body was read to its end (a 401 or 403 ahead of any reading,
// a 404, a 400 on a malformed start) carries Connection: close, and its
// connection ends once the answer is sent: net/http would otherwise read
// what is left of the body, up to 256 KiB, to reuse the connection, and a
// client sending it slowly would keep the connection busy, and counted,
// for the whole read.
func guardBodies(h http.Handler, bodyTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		body := &guardedBody{ReadCloser: r.Body}
		// A copy: the server reads what is left of its own request's body.
		r = r.WithContext(r.Context())
		r.Body = body
		h.ServeHTTP(&bodyGuardWriter{ResponseWriter: w, body: body, rc: rc}, r)
	})
}

// guardedBody is a request body that tells whether it was read to its end.
type guardedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// bodyGuardWriter closes the connection of an answer sent before its
// request's body was read.
type bodyGuardWriter struct {
	http.ResponseWriter
	body     *guardedBody
	rc       *http.ResponseController
	answered bool
}

func (w *bodyGuardWriter) WriteHeader(status int) {
	w.beforeAnswer()
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyGuardWriter) Write(p []byte) (int, error) {
	w.beforeAnswer()
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *bodyGuardWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *bodyGuardWriter) beforeAnswer() {
	if w.answered {
		return
	}
	w.answered = true
	if w.body.eof.Load() {
		return
	}
	w.Header().Set("Connection", "close")
	// The rest of the body is not waited for.
	_ = w.rc.SetReadDeadline(aLongTimeAgo)
}
