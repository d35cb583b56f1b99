package localstack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// StackConfig configures StartStack.
type StackConfig struct {
	// Dir holds both servers' data (redis/ and postgres/); created if missing.
	Dir string
	// AppendFsync is Redis's appendfsync: always (default) or everysec.
	AppendFsync string
	// PostgresSettings are added to PostgreSQL's configuration; may be nil.
	PostgresSettings map[string]string
	Logger           *slog.Logger
}

// Stack is a redis-server and a PostgreSQL with a database named invledger,
// for `invledger dev`, `demo` and `bench --compare`.
type Stack struct {
	Redis       *RedisServer
	Postgres    *PostgresServer
	DatabaseURL string
}

// StartStack starts both servers under cfg.Dir and creates the invledger
// database unless a previous run made it.
func StartStack(ctx context.Context, cfg StackConfig) (*Stack, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	// The postgres OS user must reach the data dir when we run as root.
	if err := os.Chmod(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.AppendFsync == "" {
		cfg.AppendFsync = "always"
	}
	s := &Stack{}
	var err error
	if s.Redis, err = StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, "redis"), AppendFsync: cfg.AppendFsync, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if s.Postgres, err = StartPostgres(ctx, PostgresConfig{Dir: filepath.Join(cfg.Dir, "postgres"), Fsync: true,
		Logger: cfg.Logger, Settings: cfg.PostgresSettings}); err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.Postgres.CreateDatabase(ctx, "invledger"); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42P04" { // duplicate_database: a previous run made it
			s.Stop()
			return nil, err
		}
	}
	s.DatabaseURL = s.Postgres.URL("invledger")
	return s, nil
}

// Stop shuts both servers down gracefully, so the next start finds clean data.
func (s *Stack) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.Postgres != nil {
		_ = s.Postgres.Stop(ctx)
	}
	if s.Redis != nil {
		_ = s.Redis.Stop(ctx)
	}
}
