package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/httpapi/requestid"
	"github.com/invledger/invledger/adapters/wire"
)

// requestID is the caller's X-Request-Id when it is 1-128 visible ASCII
// characters, safe to log as it is, else a new random one.
func requestID(r *http.Request) string {
	id := r.Header.Get(wire.HeaderRequestID)
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		ok = id[i] > ' ' && id[i] < 0x7f
	}
	if ok {
		return id
	}
	return uuid.NewString()
}

// WithRequestID serves h, a handler beside the API such as the console,
// as the API serves its own requests: its answers carry X-Request-Id
// (requestID's) and its context holds it for log lines.
func WithRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestID(r)
		w.Header()[wire.HeaderRequestID] = []string{id}
		h.ServeHTTP(w, r.WithContext(requestid.NewContext(r.Context(), id)))
	})
}

// trackedWriter notes what the access log and the metrics need: the
// status sent and the principal authorize found.
type trackedWriter struct {
	http.ResponseWriter
	status    int
	principal string
}

func (w *trackedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *trackedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushing a stream, deadlines).
func (w *trackedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// done logs the request's access line and reports it to OnRequest.
func (s *server) done(r *http.Request, w *trackedWriter, start time.Time) {
	elapsed := logAccess(s.log, r, w, start)
	if s.onRequest != nil {
		s.onRequest(r.Pattern, w.status, elapsed)
	}
}

// logAccess writes the access line of r, answered through w, and returns
// how long the request took since start. It hands the record to the
// handler itself: Logger.LogAttrs would also walk the stack for a source
// line that no invledger handler prints and that would name this function.
func logAccess(log *slog.Logger, r *http.Request, w *trackedWriter, start time.Time) time.Duration {
	now := time.Now()
	elapsed := now.Sub(start)
	if w.status == 0 {
		w.status = http.StatusOK // a handler that wrote nothing: net/http sends 200
	}
	h := log.Handler()
	if h.Enabled(r.Context(), slog.LevelInfo) {
		rec := slog.NewRecord(now, slog.LevelInfo, "http request", 0)
		rec.AddAttrs(slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Int("status", w.status),
			slog.Duration("duration", elapsed), slog.String("principal", w.principal))
		_ = h.Handle(r.Context(), rec) // as Logger does: a handler's failure to write has no one to go to
	}
	return elapsed
}

// AccessLog gives the requests of next, a handler served beside the API
// (the console), the API's X-Request-Id and access line. next names the
// principal with SetPrincipal once it knows it.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestID(r)
		w.Header()[wire.HeaderRequestID] = []string{id}
		r = r.WithContext(requestid.NewContext(r.Context(), id))
		tw := &trackedWriter{ResponseWriter: w}
		defer func() { logAccess(log, r, tw, start) }()
		next.ServeHTTP(tw, r)
	})
}

// SetPrincipal names who made the request answered through w in its
// access line, when w came from AccessLog.
func SetPrincipal(w http.ResponseWriter, name string) {
	if tw, ok := w.(*trackedWriter); ok {
		tw.principal = name
	}
}
