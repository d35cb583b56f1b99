// Package requestid carries an API request's id in its context, and adds
// it to every log line logged with that context, whichever layer logs it.
// The HTTP API assigns the id (X-Request-Id); the composition root wraps
// the application's logger with LogHandler.
package requestid

import (
	"context"
	"log/slog"
)

type key struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// FromContext returns the id ctx carries, if any.
func FromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(key{}).(string)
	return id, ok
}

// LogHandler wraps h so that a record logged with a context carrying an
// id has it as http_request_id, never request_id, which names a purchase's
// request id everywhere else: one request's lines can be found together, and
// matched with the trace_id its caller was answered. A handler wrapped
// already is returned as it is.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(handler); ok {
		return h
	}
	return handler{h}
}

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, rec slog.Record) error {
	if id, ok := FromContext(ctx); ok {
		rec.AddAttrs(slog.String("http_request_id", id))
	}
	return h.Handler.Handle(ctx, rec)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(attrs)}
}

func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
