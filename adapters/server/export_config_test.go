package server

import (
	"strings"
	"testing"
	"time"
)

func TestExportConfigNamesEachBadSetting(t *testing.T) {
	err := Config{Export: ExportConfig{NATSURL: "http://u:pw-secret@h:4222", AMQPURL: "amqp//nohost",
		Prefix: "a..b", NATSDuplicateWindow: time.Millisecond}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"--export-nats-url (INVLEDGER_EXPORT_NATS_URL)", "--export-amqp-url (INVLEDGER_EXPORT_AMQP_URL)",
		"--export-prefix (INVLEDGER_EXPORT_PREFIX)", "--export-nats-duplicate-window (INVLEDGER_EXPORT_NATS_DUPLICATE_WINDOW)", "u:***@h"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "pw-secret") {
		t.Errorf("the error shows the password: %v", err)
	}
	c := Config{Components: []string{ComponentExport}}
	c.setDefaults()
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--export-nats-url") {
		t.Errorf("an export process without a broker: %v", err)
	}
	c = Config{Export: ExportConfig{NATSURL: "nats://h:4222", AMQPURL: "amqps://u:p@h/vhost"}}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("valid settings refused: %v", err)
	}
}
