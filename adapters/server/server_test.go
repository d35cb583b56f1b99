package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/servechild"
)

func TestMain(m *testing.M) {
	if code, child := servechild.Main(childEnv, serveChild); child {
		os.Exit(code)
	}
	localstacktest.Main(m)
}

func TestDurabilityCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		appendOnly    bool
		fsync, mode   string
		allowVolatile bool
		wantErr       string
	}{
		{"strict on always", true, "always", "strict", false, ""},
		{"strict on everysec", true, "everysec", "strict", false, "appendfsync always"},
		{"everysec on everysec", true, "everysec", "everysec", false, ""},
		{"persistence off", false, "always", "strict", false, "--allow-volatile-redis"},
		{"persistence off allowed", false, "always", "strict", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := localstacktest.Redis(t, func(c *localstack.RedisConfig) {
				c.DisableAppendOnly = !tc.appendOnly
				c.AppendFsync = tc.fsync
			})
			client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer client.Close()
			err := checkDurability(ctx, client, safetyPolicy{mode: tc.mode, allowVolatile: tc.allowVolatile}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestCheckNamesEveryNegativeDelay: a negative --archive-after or
// --retire-after is refused before anything starts, naming flag and
// variable, both at once.
func TestCheckNamesEveryNegativeDelay(t *testing.T) {
	t.Parallel()
	err := Check(Config{Components: []string{ComponentReconciler}, ArchiveAfter: -time.Second, RetireAfter: -time.Second})
	for _, want := range []string{"--archive-after (INVLEDGER_ARCHIVE_AFTER)", "--retire-after (INVLEDGER_RETIRE_AFTER)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v, want it to name %s", err, want)
		}
	}
	if err := Check(Config{Components: []string{ComponentReconciler}, RetireAfter: 24 * time.Hour}); err != nil {
		t.Errorf("Check of a valid delay: %v", err)
	}
}
