package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
)

func TestShutdownNoiseDropsOnlyCancellationErrors(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(shutdownNoise{slog.NewTextHandler(&buf, nil)})
	log.Error("xpendingext fail", "error", fmt.Errorf("read: %w", context.Canceled))
	log.Warn("retrying", "error", context.Canceled) // below ERROR: kept
	log.Error("read fail", "error", errors.New("connection refused"))
	out := buf.String()
	if strings.Contains(out, "xpendingext") || !strings.Contains(out, "retrying") || !strings.Contains(out, "connection refused") {
		t.Fatalf("filtered log:\n%s", out)
	}
}

func TestRouterLoggerTracesOnlyWhenTraceIsOn(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, watermill.LevelTrace} {
		var buf bytes.Buffer
		log := newRouterLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level})))
		log.With(watermill.LogFields{"handler": "h"}).Trace("received", watermill.LogFields{"message_uuid": "u"})
		log.Info("started", nil) // Info is logged at Debug
		out := buf.String()
		if traced := strings.Contains(out, "received") && strings.Contains(out, "handler=h"); traced != (level == watermill.LevelTrace) || !strings.Contains(out, "started") {
			t.Fatalf("level %v logged:\n%s", level, out)
		}
	}
}
