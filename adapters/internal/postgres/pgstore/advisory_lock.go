package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/ledger"
)

var _ ledger.Lock = (*PostgresAdvisoryLock)(nil)

// PostgresAdvisoryLock is a lock shared by every process on one database: a
// session-level PostgreSQL advisory lock, held on a connection of its own
// for as long as the lease lasts. When the holder dies, PostgreSQL ends its
// session and so frees the lock, without any timeout to wait out.
type PostgresAdvisoryLock struct {
	pool *pgxpool.Pool
	key  int64
	name string
}

// NewPostgresAdvisoryLock returns the lock called name; every process that
// names the same lock on the same database contends for one lock.
func NewPostgresAdvisoryLock(pool *pgxpool.Pool, name string) *PostgresAdvisoryLock {
	h := fnv.New64a()
	_, _ = h.Write([]byte("invledger:" + name))
	return &PostgresAdvisoryLock{pool: pool, key: int64(h.Sum64()), name: name}
}

// TryAcquire takes the lock if no session holds it.
func (l *PostgresAdvisoryLock) TryAcquire(ctx context.Context) (ledger.Lease, bool, error) {
	return l.acquire(ctx, false)
}

// Acquire waits for the lock until ctx ends.
func (l *PostgresAdvisoryLock) Acquire(ctx context.Context) (ledger.Lease, error) {
	lease, _, err := l.acquire(ctx, true)
	return lease, err
}

func (l *PostgresAdvisoryLock) acquire(ctx context.Context, wait bool) (ledger.Lease, bool, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", l.name, translate(err))
	}
	got := true
	if wait {
		_, err = conn.Exec(ctx, "SELECT pg_advisory_lock($1)", l.key)
	} else {
		err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&got)
	}
	if err != nil {
		// A cancelled wait may leave the lock granted on the connection:
		// closing it ends the session, which frees it.
		_ = conn.Hijack().Close(context.WithoutCancel(ctx))
		return nil, false, fmt.Errorf("lock %s: %w", l.name, translate(err))
	}
	if !got {
		conn.Release()
		return nil, false, nil
	}
	return &advisoryLease{conn: conn, lock: l}, true, nil
}

// advisoryLease holds the lock's connection.
type advisoryLease struct {
	conn *pgxpool.Conn
	lock *PostgresAdvisoryLock
}

// Check confirms that the session holding the lock is alive: only this
// lease unlocks it, so a live session still holds it.
func (a *advisoryLease) Check(ctx context.Context) error {
	if err := a.conn.Ping(ctx); err != nil {
		return fmt.Errorf("lock %s: the session holding it broke: %w", a.lock.name, translate(err))
	}
	return nil
}

// Release unlocks and returns the connection to the pool; a connection
// that cannot unlock is closed, which frees the lock all the same.
func (a *advisoryLease) Release(ctx context.Context) {
	if _, err := a.conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", a.lock.key); err != nil {
		_ = a.conn.Hijack().Close(ctx)
		return
	}
	a.conn.Release()
}
