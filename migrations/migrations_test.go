package migrations

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/invledger/invledger/adapters/localstack/localstacktest"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

// TestMigrationsUpDownUp applies every migration, re-applies (a no-op), rolls
// everything back, and applies again, so each Down really undoes its Up.
func TestMigrationsUpDownUp(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("pgx", localstacktest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	if err := Up(ctx, db, quiet); err != nil {
		t.Fatal(err)
	}
	applied, embedded, err := Version(ctx, db)
	if err != nil || applied != embedded || embedded < 2 {
		t.Fatalf("after Up: applied %d embedded %d err %v", applied, embedded, err)
	}
	if err := Up(ctx, db, quiet); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	for _, table := range []string{"skus", "ledger_entries", "balances", "dead_letters"} {
		var exists bool
		if err := db.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil || !exists {
			t.Fatalf("table %s missing after Up (err %v)", table, err)
		}
	}

	p, err := newProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('ledger_entries') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("ledger_entries still exists after rolling back (err %v)", err)
	}
	if err := Up(ctx, db, quiet); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
}
