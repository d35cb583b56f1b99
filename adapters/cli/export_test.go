package cli

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestExportReplayRefusesBadArguments: each mistake is a usage error
// (exit 64) naming what to give, before anything is connected to.
func TestExportReplayRefusesBadArguments(t *testing.T) {
	t.Setenv("INVLEDGER_DATABASE_URL", "postgres://127.0.0.1:1/x")
	for _, tc := range []struct{ args, want string }{
		{"export replay --sku s", "--from-seq must be at least 1"},
		{"export replay --export-nats-url nats://h:4222", "give --sku with --from-seq, or --since"},
		{"export replay --sku s --from-seq 3 --since 2026-01-01T00:00:00Z --export-nats-url nats://h:4222", "give --sku with --from-seq, or --since"},
		{"export replay --since yesterday --export-nats-url nats://h:4222", "--since \"yesterday\" is not an RFC 3339 time"},
		{"export replay --sku s --from-seq 3", "set --export-nats-url (INVLEDGER_EXPORT_NATS_URL) or --export-amqp-url (INVLEDGER_EXPORT_AMQP_URL)"},
		{"export replay --sku s --from-seq 3 --export-amqp-url nats://u:pw@h", "--export-amqp-url (INVLEDGER_EXPORT_AMQP_URL): \"nats://u:***@h\" is not a URL of scheme amqp:// or amqps://"},
	} {
		cmd := NewRootCmd()
		cmd.SetArgs(strings.Fields(tc.args))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.ExecuteContext(context.Background())
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v (exit %d), want exit %d naming %q", tc.args, err, exitCode(err), exitUsage, tc.want)
		}
	}
}
