package requestid

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLogHandlerAddsTheIDOnce: a line logged with a request's context has
// its request_id once, also through With and a second wrapping; a line
// without one has none.
func TestLogHandlerAddsTheIDOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(LogHandler(slog.NewJSONHandler(&buf, nil)))).With("component", "api")
	log.InfoContext(NewContext(context.Background(), "req-7"), "with")
	log.InfoContext(context.Background(), "without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Count(lines[0], `"http_request_id"`) != 1 || strings.Contains(lines[1], "request_id") {
		t.Fatalf("log lines %q", lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["http_request_id"] != "req-7" || first["component"] != "api" {
		t.Fatalf("first line %v (%v)", first, err)
	}
}
