package projections

import (
	"context"
	"log/slog"
	"strings"

	"github.com/ThreeDotsLabs/watermill"
)

// routerLogger is the Watermill logger of the projector's router:
// Watermill's slog adapter, with Info mapped to Debug, whose Trace calls
// cost nothing while trace is off. The router traces every message it
// receives and acks, and the adapter turns the fields into attributes
// before slog looks at the level: 4% of the projector's CPU.
type routerLogger struct {
	watermill.LoggerAdapter
	trace bool
}

func newRouterLogger(logger *slog.Logger) routerLogger {
	return routerLogger{
		LoggerAdapter: watermill.NewSlogLoggerWithLevelMapping(slog.New(shutdownNoise{logger.Handler()}),
			map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug}),
		trace: logger.Enabled(context.Background(), watermill.LevelTrace),
	}
}

func (l routerLogger) Trace(msg string, fields watermill.LogFields) {
	if l.trace {
		l.LoggerAdapter.Trace(msg, fields)
	}
}

func (l routerLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return routerLogger{LoggerAdapter: l.LoggerAdapter.With(fields), trace: l.trace}
}

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
