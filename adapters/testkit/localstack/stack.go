package localstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
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
	// KeepPorts starts each server on the port it had at the previous start
	// under Dir (remembered in Dir/ports) when that port is free, so the URLs
	// printed then stay valid; otherwise, and the first time, on a free port.
	KeepPorts bool
}

// stackPorts is Dir/ports: the ports of the last start.
type stackPorts struct {
	Redis    int `json:"redis"`
	Postgres int `json:"postgres"`
}

// portsFile is where KeepPorts remembers the ports under dir.
func portsFile(dir string) string { return filepath.Join(dir, "ports") }

// readPorts returns the remembered ports; none (zeros) when the file is
// missing or unreadable, so a start never fails over a hint.
func readPorts(dir string) stackPorts {
	var p stackPorts
	if b, err := os.ReadFile(portsFile(dir)); err == nil {
		_ = json.Unmarshal(b, &p)
	}
	return p
}

// ifFree returns port when nothing listens on it on 127.0.0.1, else 0 (a
// free port). Another process can still take it before the server binds;
// the start then fails, naming the port, and the next one picks anew.
func ifFree(port int) int {
	if port <= 0 {
		return 0
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0
	}
	_ = l.Close()
	return port
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
	var last stackPorts
	if cfg.KeepPorts {
		last = readPorts(cfg.Dir)
	}
	s := &Stack{}
	var err error
	if s.Redis, err = StartRedis(ctx, RedisConfig{Dir: filepath.Join(cfg.Dir, "redis"), AppendFsync: cfg.AppendFsync, Logger: cfg.Logger,
		Port: ifFree(last.Redis)}); err != nil {
		return nil, err
	}
	if s.Postgres, err = StartPostgres(ctx, PostgresConfig{Dir: filepath.Join(cfg.Dir, "postgres"), Fsync: true,
		Logger: cfg.Logger, Settings: cfg.PostgresSettings, Port: ifFree(last.Postgres)}); err != nil {
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
	if cfg.KeepPorts {
		b, _ := json.Marshal(stackPorts{Redis: s.Redis.port, Postgres: s.Postgres.Port()}) // cannot fail: two ints
		if err := os.WriteFile(portsFile(cfg.Dir), b, 0o644); err != nil {
			s.Stop()
			return nil, fmt.Errorf("localstack: remember ports: %w", err)
		}
	}
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
