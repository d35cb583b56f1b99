package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
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
