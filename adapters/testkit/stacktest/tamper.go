package stacktest

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
)

// guarded are the ledger's tables with the triggers that guard them: the
// append-only ones, and the refusal of unkeyed seals in a keyed ledger.
var guarded = map[string][]string{
	"ledger_entries":          {"ledger_entries_no_update_delete", "ledger_entries_no_truncate"},
	"ledger_seals":            {"ledger_seals_no_update_delete", "ledger_seals_no_truncate", "ledger_seals_keyed_only"},
	"ledger_checkpoints":      {"ledger_checkpoints_no_update_delete", "ledger_checkpoints_no_truncate"},
	"ledger_checkpoint_heads": {"ledger_checkpoint_heads_no_update_delete", "ledger_checkpoint_heads_no_truncate"},
}

// Superuser runs stmts on pool with the guarding triggers of the ledger,
// its seals and its checkpoints off, then turns them back on, as
// someone going around the database's guard would.
func Superuser(t testing.TB, pool *pgxpool.Pool, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var all, after []string
	for table, triggers := range guarded {
		all = append(all, `ALTER TABLE `+table+` DISABLE TRIGGER USER`)
		for _, tr := range triggers {
			after = append(after, `ALTER TABLE `+table+` ENABLE ALWAYS TRIGGER `+tr)
		}
	}
	for _, stmt := range append(append(all, stmts...), after...) {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// Reseal recomputes sku's seals from seq from on with the public formula,
// domain.SealHash, over the rows as they are now, as a superuser with the
// triggers off: what someone who edited a row and knows no seal key does
// to hide the edit.
func Reseal(t testing.TB, pool *pgxpool.Pool, sku string, from int64) {
	t.Helper()
	ctx := context.Background()
	var prev string
	if err := pool.QueryRow(ctx, `SELECT COALESCE((SELECT hash FROM ledger_seals WHERE sku = $1 AND seq < $2 ORDER BY seq DESC LIMIT 1), '')`,
		sku, from).Scan(&prev); err != nil {
		t.Fatal(err)
	}
	id, err := domain.NewSKUID(sku)
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	if err := pgstore.NewPostgresLedgerStore(pool).ScanSKU(ctx, id, func(e domain.Event) error {
		if e.Seq < from {
			return nil
		}
		h := domain.SealHash(prev, e)
		stmts = append(stmts, `UPDATE ledger_seals SET prev_hash = '`+prev+`', hash = '`+h+`', algorithm = 'sha256', key_id = NULL
			WHERE sku = '`+sku+`' AND seq = `+strconv.FormatInt(e.Seq, 10))
		prev = h
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	Superuser(t, pool, stmts...)
}
