package migrations

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3/lock"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

// TestMigrationsUpDownUp applies every migration, re-applies (a no-op), rolls
// everything back, and applies again, so each Down really undoes its Up.
func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
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
	if err != nil || applied != embedded || embedded < 1 {
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
	// The chain lives in ledger_seals alone: the ledger rows carry no link.
	var links int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns
WHERE table_name = 'ledger_entries' AND column_name IN ('prev_hash', 'hash')`).Scan(&links); err != nil || links != 0 {
		t.Fatalf("ledger_entries has %d chain columns (err %v), want none", links, err)
	}

	p, err := newProvider(db, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down to 0: %v", err)
	}
	// Nothing of the schema is left but goose's own version table.
	var left string
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(string_agg(name, ', '), '') FROM (
    SELECT relname AS name FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname NOT LIKE 'goose_db_version%'
    UNION ALL SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace) o`).Scan(&left); err != nil || left != "" {
		t.Fatalf("left after rolling back: %q (err %v), want nothing", left, err)
	}
	if err := Up(ctx, db, quiet); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
}

// TestVersionDoesNotWaitForTheMigrationLock holds goose's advisory lock on
// one connection, as a migrate in progress would, and reads the version on
// another: servers that check the schema must not queue behind it.
func TestVersionDoesNotWaitForTheMigrationLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sql.Open("pgx", localstacktest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := Up(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		t.Fatal(err)
	}
	if err := locker.SessionLock(ctx, holder); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.SessionUnlock(ctx, holder) }()

	// goose polls a held lock every 5 s; a version read that waited for it
	// would hit this deadline.
	readCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	applied, embedded, err := Version(readCtx, db)
	if err != nil {
		t.Fatalf("Version while the migration lock is held: %v", err)
	}
	if applied != embedded {
		t.Fatalf("applied %d, embedded %d", applied, embedded)
	}
}
