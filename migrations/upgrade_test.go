package migrations_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/migrations"
)

// TestUpgradeFrom100KeysTheUnkeyedChains starts from release 1.0.0's
// schema and data (00001_baseline.sql, rows sealed with the unkeyed sha256
// link), migrates, and checks that no 1.0.0 row changed, that verify
// reports the ledger as unkeyed and refuses to vouch for it with a key
// before serve keyed it, that the first pass of a keyed sealer checkpoints
// every chain head before sealing anything, that the keyed ledger refuses
// an unkeyed seal (a 1.0.0 serve still running), and that from then on a
// row of 1.0.0 edited and re-sealed with the public formula is caught, as
// is one sealed after the upgrade.
func TestUpgradeFrom100KeysTheUnkeyedChains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := localstacktest.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	release100, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release100.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// 1.0.0's data: two SKUs stocked and sold three times, appended as its
	// projector did and sealed as its sealer did, with SealHash.
	at := time.UnixMicro(1764500000123456)
	for _, sku := range []string{"old-a", "old-b"} {
		events := []domain.Event{{ID: uuid.NewString(), Type: domain.EventStocked, SKU: sku, Seq: 1, Qty: 10, Delta: 10, Balance: 10,
			Actor: "cli:ops", OccurredAt: at, StreamID: "1-0"}}
		for i := int64(2); i <= 4; i++ {
			events = append(events, domain.Event{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: sku, Seq: i, Qty: 1, Delta: -1,
				Balance: 12 - i, User: "u" + string(rune('0'+i)), RequestID: "r" + string(rune('0'+i)), OccurredAt: at, StreamID: "1-0"})
		}
		if _, err := stacktest.ProjectionStore(pool).AppendBatch(ctx, events); err != nil {
			t.Fatal(err)
		}
		prev := ""
		for _, e := range events {
			h := domain.SealHash(prev, e)
			if _, err := pool.Exec(ctx, `INSERT INTO ledger_seals (sku, seq, prev_hash, hash, algorithm) VALUES ($1, $2, $3, $4, 'sha256')`,
				sku, e.Seq, prev, h); err != nil {
				t.Fatal(err)
			}
			prev = h
		}
	}
	var before string
	fingerprint := `SELECT string_agg(sku || seq || prev_hash || hash || algorithm || sealed_at, ',' ORDER BY sku, seq) FROM ledger_seals`
	if err := pool.QueryRow(ctx, fingerprint).Scan(&before); err != nil {
		t.Fatal(err)
	}

	if err := migrations.Up(ctx, db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := pool.QueryRow(ctx, fingerprint).Scan(&after); err != nil || after != before {
		t.Fatalf("1.0.0's seals changed by the upgrade (%v):\nbefore %s\nafter  %s", err, before, after)
	}
	open := func(keys string) *app.Application {
		a, err := app.New(ctx, app.Config{DatabaseURL: url, RedisURL: "redis://127.0.0.1:1/0", SealKeys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		return a
	}
	const key = "k1:0123456789abcdef0123456789abcdef"
	keys, err := domain.ParseSealKeys(key)
	if err != nil {
		t.Fatal(err)
	}
	seals := stacktest.SealStore(pool)
	verify := func(keys domain.SealKeys) ledger.ChainReport {
		t.Helper()
		rep, err := ledger.VerifyChains(ctx, seals, ledger.VerifyOptions{Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	// Before serve runs with a key: unkeyed, and said so; with a key,
	// verify cannot vouch for anything yet.
	if rep := verify(domain.SealKeys{}); !rep.Intact() || !rep.Unprotected() || rep.Unkeyed != 8 || rep.CannotVerify() != nil {
		t.Fatalf("upgraded, not keyed yet, verified without a key: %+v", rep)
	}
	if err := verify(keys).CannotVerify(); err == nil || !strings.Contains(err.Error(), "no keyed checkpoint") {
		t.Fatalf("upgraded, not keyed yet, verified with a key: %v, want it unable to vouch", err)
	}

	// serve's first pass with a key checkpoints both heads, and seals a
	// row projected since with the key.
	keyed := open(key)
	pass, err := keyed.Sealer.SealAll(ctx)
	if err != nil || pass.Checkpoint == nil || pass.Checkpoint.N != 1 || len(pass.Checkpoint.Heads) != 2 || pass.Checkpoint.Heads[1].Seq != 4 {
		t.Fatalf("first keyed pass: %+v %v, want checkpoint 1 of both heads at seq 4", pass, err)
	}
	if _, err := stacktest.ProjectionStore(keyed.Pool).AppendBatch(ctx, []domain.Event{{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: "old-a",
		Seq: 5, Qty: 1, Delta: -1, Balance: 6, User: "new", RequestID: "new", OccurredAt: at, StreamID: "2-0"}}); err != nil {
		t.Fatal(err)
	}
	if pass, err := keyed.Sealer.SealAll(ctx); err != nil || pass.Sealed[domain.SealHMACSHA256] != 1 {
		t.Fatalf("keyed pass: %+v %v, want one keyed seal", pass, err)
	}
	if rep := verify(keys); !rep.Intact() || rep.CannotVerify() != nil || rep.Unprotected() || rep.Unkeyed != 8 || rep.Keyed != 1 || rep.Checkpoints != 1 {
		t.Fatalf("keyed ledger: %+v, want 8 unkeyed rows vouched for, 1 keyed, 1 checkpoint", rep)
	}
	if rep := verify(domain.SealKeys{}); rep.CannotVerify() == nil {
		t.Fatalf("keyed ledger verified without a key: %+v, want it unable to check", rep)
	}
	// A sealer of 1.0.0 still running in a rolling upgrade appends an
	// unkeyed seal as it did: the keyed ledger refuses it.
	if _, err := stacktest.ProjectionStore(keyed.Pool).AppendBatch(ctx, []domain.Event{{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: "old-b",
		Seq: 5, Qty: 1, Delta: -1, Balance: 6, User: "new", RequestID: "new", OccurredAt: at, StreamID: "2-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO ledger_seals (sku, seq, prev_hash, hash, algorithm) VALUES ('old-b', 5, 'x', 'y', 'sha256')`); err == nil ||
		!strings.Contains(err.Error(), "the ledger is keyed") {
		t.Fatalf("an unkeyed seal appended to a keyed ledger: %v, want it refused", err)
	}
	if pass, err := keyed.Sealer.SealAll(ctx); err != nil || pass.Sealed[domain.SealHMACSHA256] != 1 {
		t.Fatalf("keyed pass: %+v %v, want old-b's seq 5 sealed with the key", pass, err)
	}

	// The attack on rows of 1.0.0 and on a row sealed since.
	stacktest.Superuser(t, pool, `UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'old-b' AND seq = 2`)
	stacktest.Reseal(t, pool, "old-b", 2)
	stacktest.Superuser(t, pool, `UPDATE ledger_entries SET user_id = 'mallory' WHERE sku = 'old-a' AND seq = 5`)
	stacktest.Reseal(t, pool, "old-a", 5)
	rep := verify(keys)
	if len(rep.Broken) != 2 || rep.Broken[0].SKU != "old-a" || rep.Broken[0].Seq != 5 ||
		rep.Broken[1].SKU != "old-b" || rep.Broken[1].Seq != 4 || !strings.Contains(rep.Broken[1].Reason, "checkpoint 1") {
		t.Fatalf("after the attack: %+v, want old-a broken at seq 5, old-b at its checkpointed head, seq 4", rep.Broken)
	}
}
