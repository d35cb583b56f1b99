package projections

import (
	"context"
	"log/slog"
	"strings"
)

// shutdownNoise drops the errors Watermill's subscriber logs when its reads
// are cancelled by an orderly shutdown ("context canceled"): they say
// nothing went wrong, and at ERROR they would send operators looking.
type shutdownNoise struct{ slog.Handler }

func (h shutdownNoise) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		cancelled := false
		r.Attrs(func(a slog.Attr) bool {
			cancelled = strings.Contains(a.Value.String(), context.Canceled.Error())
			return !cancelled
		})
		if cancelled {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h shutdownNoise) WithAttrs(attrs []slog.Attr) slog.Handler {
	return shutdownNoise{h.Handler.WithAttrs(attrs)}
}

func (h shutdownNoise) WithGroup(name string) slog.Handler {
	return shutdownNoise{h.Handler.WithGroup(name)}
}
