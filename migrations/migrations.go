package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"log/slog"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration to db and logs each one applied.
// It is safe to run concurrently from several processes: goose takes a
// PostgreSQL advisory lock for the duration.
func Up(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	provider, err := newProvider(db, true)
	if err != nil {
		return err
	}
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		log.InfoContext(ctx, "migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// Version returns the newest applied migration and the newest one embedded.
// It takes no lock: servers started together check the schema at once
// instead of queueing on the migration lock, which goose polls every 5 s.
func Version(ctx context.Context, db *sql.DB) (applied, embedded int64, err error) {
	provider, err := newProvider(db, false)
	if err != nil {
		return 0, 0, err
	}
	if applied, err = provider.GetDBVersion(ctx); err != nil {
		return 0, 0, fmt.Errorf("read migration version: %w", err)
	}
	sources := provider.ListSources()
	if len(sources) > 0 {
		embedded = sources[len(sources)-1].Version
	}
	return applied, embedded, nil
}

func newProvider(db *sql.DB, locked bool) (*goose.Provider, error) {
	var opts []goose.ProviderOption
	if locked {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, opts...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}
