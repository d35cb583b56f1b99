package stacktest

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Adapters a test builds beside the stack's own, typed by their ports: a
// second lock, a reconcile source with other settings, a store over a
// database the test migrated itself.

// AdvisoryLock is a PostgreSQL advisory lock named name over the stack's
// pool, as serve elects its leaders and serialises repairs.
func (s *Stack) AdvisoryLock(name string) ledger.Lock {
	return pgstore.NewPostgresAdvisoryLock(s.Pool, name)
}

// NewReconcileSource is a reconciler's reader of Redis over the stack's
// client that reads at most tailLimit stream entries in flight per
// partition (0: the default).
func (s *Stack) NewReconcileSource(tailLimit int) (reconcile.Inventory, error) {
	return redisinventory.NewRedisReconcileSource(s.App.Redis, approot.Of(s.App).Keys, redisinventory.ReconcileSourceConfig{TailLimit: tailLimit})
}

// ProjectionStore is the projector's PostgreSQL store over pool.
func ProjectionStore(pool *pgxpool.Pool) ProjectorStore {
	return pgstore.NewPostgresProjectionStore(pool)
}

// SealStore is the ledger's tamper-evident chain over pool.
func SealStore(pool *pgxpool.Pool) Seals {
	return pgstore.NewPostgresSealStore(pool)
}

// ParseReceipt reads a receipt as Redis keeps it (a field of a SKU's
// requests hash).
func ParseReceipt(raw string) (domain.Purchase, error) {
	return redisinventory.ParseReceipt(raw)
}
