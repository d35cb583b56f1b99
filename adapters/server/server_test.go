package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/localstack"
	"github.com/invledger/invledger/adapters/localstack/localstacktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild())
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
