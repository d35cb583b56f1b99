package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/migrations"
	"github.com/invledger/invledger/projections"
)

// The ports of packages that pgstore must not link (Watermill, go-redis,
// HTTP) are asserted here rather than next to the types.
var (
	_ projections.LedgerAppender  = (*pgstore.PostgresProjectionStore)(nil)
	_ projections.DeadLetterStore = (*pgstore.PostgresProjectionStore)(nil)
	_ httpapi.RunLister           = (*pgstore.PostgresReconciliationStore)(nil)
	_ httpapi.IdempotencyStore    = (*pgstore.PostgresIdempotencyStore)(nil)
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

// newPool returns a pool over a fresh, migrated database of the test's own.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := localstacktest.Postgres(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer func(db *sql.DB) { _ = db.Close() }(db)
	if err := migrations.Up(context.Background(), db, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func mustSKU(t *testing.T, s string) domain.SKUID {
	t.Helper()
	id, err := domain.NewSKUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func defineSKU(t *testing.T, skus *pgstore.PostgresSKUStore, sku string, stock, limit int64) domain.SKUDefinition {
	t.Helper()
	def, err := domain.NewSKUDefinition(mustSKU(t, sku), stock, limit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := skus.Create(context.Background(), def); err != nil {
		t.Fatal(err)
	}
	return def
}

// t0 is a fixed instant, whole microseconds, as PostgreSQL stores it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sale returns a SKU's stocked event and purchases by users, one unit each,
// at one-minute steps after t0.
func sale(sku string, stock int64, users ...string) []domain.Event {
	events := []domain.Event{{ID: uuid.NewString(), Type: domain.EventStocked, SKU: sku, Seq: 1, Qty: stock, Delta: stock,
		Balance: stock, OccurredAt: t0, StreamID: "1-1"}}
	for i, u := range users {
		seq := int64(i + 2)
		events = append(events, domain.Event{ID: uuid.NewString(), Type: domain.EventDeducted, SKU: sku, Seq: seq, Qty: 1,
			Delta: -1, Balance: stock - seq + 1, User: u, RequestID: "r-" + u, OccurredAt: t0.Add(time.Duration(seq) * time.Minute),
			StreamID: fmt.Sprintf("1-%d", seq)})
	}
	return events
}

// pgCode returns err's PostgreSQL error code, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

const pgInsufficientPrivilege = "42501"
