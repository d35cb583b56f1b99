package app

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestNewLoggerFormats: json writes one JSON object a line, text
// key=value, both filter by level; a bad level and a bad format are both
// named, by flag and variable.
func TestNewLoggerFormats(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "warn", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "sku", "phone-x")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "shown" || line["sku"] != "phone-x" || line["level"] != "WARN" {
		t.Fatalf("json log %q: %v", buf.String(), err)
	}
	buf.Reset()
	if log, err = NewLogger(&buf, "info", "text"); err != nil {
		t.Fatal(err)
	}
	log.Info("shown", "sku", "phone-x")
	if !strings.Contains(buf.String(), "msg=shown sku=phone-x") {
		t.Fatalf("text log %q", buf.String())
	}
	_, err = NewLogger(&buf, "loud", "xml")
	for _, want := range []string{"--log-level (INVLEDGER_LOG_LEVEL)", "--log-format (INVLEDGER_LOG_FORMAT)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewLogger(loud, xml) = %v, want it to name %s", err, want)
		}
	}
}
