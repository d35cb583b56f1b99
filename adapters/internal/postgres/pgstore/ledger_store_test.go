package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/seal"
)

func TestProjectionAndLedgerStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	projection, ledger := pgstore.NewPostgresProjectionStore(pool), pgstore.NewPostgresLedgerStore(pool)
	a, b := sale("a", 10, "u1", "u2"), sale("b", 5)

	if has, err := ledger.HasEvents(ctx, mustSKU(t, "a")); err != nil || has {
		t.Fatalf("has events before append: %v %v", has, err)
	}
	if _, _, err := ledger.Balance(ctx, mustSKU(t, "a")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("balance before append: %v, want ErrNotFound", err)
	}
	// Order does not matter: b's row, then a's out of seq order.
	inserted, err := projection.AppendBatch(ctx, append(append([]domain.Event{}, b...), a[2], a[0], a[1]))
	if err != nil || inserted[domain.EventStocked] != 2 || inserted[domain.EventDeducted] != 2 {
		t.Fatalf("append: %v %v", inserted, err)
	}
	if inserted, err := projection.AppendBatch(ctx, a); err != nil || len(inserted) != 0 {
		t.Fatalf("replay: %v %v, want nothing inserted", inserted, err)
	}
	if has, err := ledger.HasEvents(ctx, mustSKU(t, "a")); err != nil || !has {
		t.Fatalf("has events: %v %v", has, err)
	}
	if bal, _, err := ledger.Balance(ctx, mustSKU(t, "a")); err != nil || bal.Stock != 8 || bal.LastSeq != 3 {
		t.Fatalf("balance: %+v %v, want 8 at seq 3", bal, err)
	}

	var scanned []domain.Event
	if err := ledger.ScanSKU(ctx, mustSKU(t, "a"), func(e domain.Event) error { scanned = append(scanned, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(scanned) != len(a) {
		t.Fatalf("scan sku: %d events, want %d", len(scanned), len(a))
	}
	for i := range a {
		if got, want := scanned[i], a[i]; got.ID != want.ID || got.Seq != want.Seq || got.User != want.User ||
			!got.OccurredAt.Equal(want.OccurredAt) || got.StreamID != want.StreamID {
			t.Fatalf("scan sku row %d: %+v, want %+v", i, got, want)
		}
	}
	var order []string
	if err := ledger.ScanAll(ctx, func(e domain.Event) error { order = append(order, e.SKU); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(order) != 4 || order[0] != "a" || order[3] != "b" {
		t.Fatalf("scan all order: %v", order)
	}
	stop := errors.New("stop")
	if err := ledger.ScanAll(ctx, func(domain.Event) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("scan all with failing fn: %v, want its error", err)
	}

	fields := map[string]string{"sku": "x", "seq": "oops"}
	for range 2 {
		if err := projection.AddDeadLetter(ctx, "stream-0", "9-9", 0, fields, "bad seq"); err != nil {
			t.Fatal(err)
		}
	}
	var letters int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM dead_letters`).Scan(&letters); err != nil || letters != 1 {
		t.Fatalf("dead letters: %d %v, want 1", letters, err)
	}
}

func TestProjectionStoreTranslatesRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	projection := pgstore.NewPostgresProjectionStore(pool)
	events := sale("a", 10, "u1")
	if _, err := projection.AppendBatch(ctx, events); err != nil {
		t.Fatal(err)
	}
	// Another event at a taken (sku, seq) is a conflict, and nothing of its
	// batch is kept.
	clash := events[1]
	clash.ID = uuid.NewString()
	fresh := sale("c", 1)[0]
	if _, err := projection.AppendBatch(ctx, []domain.Event{fresh, clash}); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("seq clash: %v, want ErrConflict", err)
	}
	bogus := sale("d", 1)[0]
	bogus.Type = "bogus"
	if _, err := projection.AppendBatch(ctx, []domain.Event{bogus}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("unknown type: %v, want ErrInvalidInput", err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries`).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("ledger rows: %d %v, want the 2 first appended", rows, err)
	}
}

// TestLedgerRefusesChanges: the database itself refuses UPDATE, DELETE and
// TRUNCATE on the ledger's rows, their seals and the seals' checkpoints, also in a session that
// turns ordinary triggers off with session_replication_role = replica.
func TestLedgerRefusesChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	if _, err := pgstore.NewPostgresProjectionStore(pool).AppendBatch(ctx, sale("a", 10, "u1")); err != nil {
		t.Fatal(err)
	}
	keys, err := domain.ParseSealKeys("k1:0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New(seal.Config{Store: pgstore.NewPostgresSealStore(pool), Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if pass, err := sealer.SealAll(ctx); err != nil || pass.Sealed[domain.SealHMACSHA256] != 2 {
		t.Fatalf("seal: %+v %v, want 2 rows sealed", pass, err)
	}
	if _, ok, err := sealer.Checkpoint(ctx); err != nil || !ok {
		t.Fatalf("checkpoint: %v %v, want one written", ok, err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, role := range []string{"origin", "replica"} {
		if _, err := conn.Exec(ctx, `SET session_replication_role = `+role); err != nil {
			t.Fatal(err)
		}
		for _, stmt := range []string{
			`UPDATE ledger_entries SET delta = 100 WHERE seq = 1`,
			`DELETE FROM ledger_entries`,
			`TRUNCATE ledger_entries`,
			`UPDATE ledger_seals SET hash = 'forged' WHERE seq = 1`,
			`DELETE FROM ledger_seals`,
			`TRUNCATE ledger_seals`,
			`UPDATE ledger_checkpoints SET mac = 'forged'`,
			`DELETE FROM ledger_checkpoints`,
			`TRUNCATE ledger_checkpoints CASCADE`,
			`UPDATE ledger_checkpoint_heads SET seq = 1`,
			`DELETE FROM ledger_checkpoint_heads`,
			`TRUNCATE ledger_checkpoint_heads`,
		} {
			if _, err := conn.Exec(ctx, stmt); pgCode(err) != pgInsufficientPrivilege {
				t.Errorf("%s as %s: %v, want refused", stmt, role, err)
			}
		}
	}
}
