package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/invledger/invledger/adapters/localstack"
)

// privateStack is a redis-server and a PostgreSQL started from the machine's
// binaries, for dev and demo.
type privateStack struct {
	redis       *localstack.RedisServer
	postgres    *localstack.PostgresServer
	databaseURL string
}

// startPrivateStack starts both servers under dir (created if missing) with
// Redis persistence matching durability and PostgreSQL's pgSettings (may be
// nil) on top of localstack's, and creates database invledger.
func startPrivateStack(ctx context.Context, dir, durability string, log *slog.Logger, pgSettings map[string]string) (*privateStack, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The postgres OS user must reach the data dir when we run as root.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	fsync := "always"
	if durability == "everysec" {
		fsync = "everysec"
	}
	s := &privateStack{}
	var err error
	if s.redis, err = localstack.StartRedis(ctx, localstack.RedisConfig{Dir: filepath.Join(dir, "redis"), AppendFsync: fsync, Logger: log}); err != nil {
		return nil, err
	}
	if s.postgres, err = localstack.StartPostgres(ctx, localstack.PostgresConfig{Dir: filepath.Join(dir, "postgres"), Fsync: true, Logger: log, Settings: pgSettings}); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.postgres.CreateDatabase(ctx, "invledger"); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P04" { // duplicate_database: a previous run made it
			s.stop()
			return nil, err
		}
	}
	s.databaseURL = s.postgres.URL("invledger")
	return s, nil
}

// stop shuts both servers down gracefully, so the next start finds clean data.
func (s *privateStack) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.postgres != nil {
		_ = s.postgres.Stop(ctx)
	}
	if s.redis != nil {
		_ = s.redis.Stop(ctx)
	}
}

// devTokens reads the tokens file in dir, or writes one with a fresh random
// secret per role, so a restarted dev stack keeps its credentials.
func devTokens(dir string) (string, error) {
	path := filepath.Join(dir, "tokens")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var entries []string
	for _, role := range []string{"gateway", "operator", "approver", "auditor"} {
		secret := make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return "", err
		}
		entries = append(entries, fmt.Sprintf("dev-%s:%s:%s", role, role, hex.EncodeToString(secret)))
	}
	tokens := strings.Join(entries, "\n")
	if err := os.WriteFile(path, []byte(tokens+"\n"), 0o600); err != nil {
		return "", err
	}
	return tokens, nil
}
