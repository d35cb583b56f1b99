package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/seal"
)

var (
	_ seal.Store          = (*PostgresSealStore)(nil)
	_ ledger.ChainScanner = (*PostgresSealStore)(nil)
)

// PostgresSealStore keeps the tamper-evident chain in ledger_seals, beside
// the append-only ledger_entries it links, and its keyed checkpoints in
// ledger_checkpoints and ledger_checkpoint_heads, and reads them all for
// audit verify.
type PostgresSealStore struct {
	pool *pgxpool.Pool
}

// NewPostgresSealStore returns a store over pool.
func NewPostgresSealStore(pool *pgxpool.Pool) *PostgresSealStore {
	return &PostgresSealStore{pool: pool}
}

// Behind lists the SKUs whose projected rows go past their last seal, in
// SKU order: one index probe of ledger_seals per balances row.
func (s *PostgresSealStore) Behind(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `
SELECT b.sku FROM balances b
LEFT JOIN LATERAL (SELECT seq FROM ledger_seals s WHERE s.sku = b.sku ORDER BY seq DESC LIMIT 1) last ON true
WHERE b.last_seq > COALESCE(last.seq, 0)
ORDER BY b.sku`)
	if err != nil {
		return nil, fmt.Errorf("skus to seal: %w", translate(err))
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("skus to seal: %w", translate(err))
	}
	return skus, nil
}

// SealNext runs one sealing step of sku in one transaction: it reads the
// SKU's last seal and up to limit rows after it in seq order, and stores
// the seals link returns for them. A transaction-scoped advisory lock per
// SKU keeps two sealers (two serve processes) off the same SKU: the one
// that does not get it seals nothing and returns 0.
func (s *PostgresSealStore) SealNext(ctx context.Context, sku string, limit int, link seal.LinkFunc) (sealed int, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("seal %s: %w", sku, translate(err))
	}
	defer func() {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) && err == nil {
			err = fmt.Errorf("seal %s: %w", sku, translate(rbErr))
		}
	}()
	var locked bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('invledger.ledger_seals:' || $1, 0))`, sku).Scan(&locked); err != nil {
		return 0, fmt.Errorf("seal %s: %w", sku, translate(err))
	}
	if !locked {
		return 0, nil
	}
	last := domain.Seal{SKU: sku}
	var algorithm string
	err = tx.QueryRow(ctx, `SELECT seq, prev_hash, hash, algorithm, COALESCE(key_id, '') FROM ledger_seals WHERE sku = $1 ORDER BY seq DESC LIMIT 1`, sku).
		Scan(&last.Seq, &last.PrevHash, &last.Hash, &algorithm, &last.KeyID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("seal %s: last seal: %w", sku, translate(err))
	}
	last.Algorithm = domain.SealAlgorithm(algorithm)
	var rows []domain.Event
	if err := scanEvents(ctx, tx, func(e domain.Event) error { rows = append(rows, e); return nil },
		`SELECT `+eventColumns+` FROM ledger_entries e WHERE sku = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sku, last.Seq, limit); err != nil {
		return 0, fmt.Errorf("seal %s: %w", sku, err)
	}
	seals := link(last, rows)
	if len(seals) == 0 {
		return 0, nil
	}
	n := len(seals)
	seqs, prevs, hashes, algorithms, keyIDs := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	for i, sl := range seals {
		seqs[i], prevs[i], hashes[i], algorithms[i] = sl.Seq, sl.PrevHash, sl.Hash, string(sl.Algorithm)
		if sl.KeyID != "" {
			keyIDs[i] = &sl.KeyID
		}
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO ledger_seals (sku, seq, prev_hash, hash, algorithm, key_id)
SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])`, sku, seqs, prevs, hashes, algorithms, keyIDs); err != nil {
		return 0, fmt.Errorf("seal %s: store %d seals: %w", sku, n, translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("seal %s: %w", sku, translate(err))
	}
	return n, nil
}

// ScanChain calls fn for every seq of sku (every SKU when sku is "") that
// has a ledger row, a seal or both, ordered by SKU and seq: a full join of
// the two tables on their (sku, seq) indexes, streamed. The rows are read
// through eventColumns, as the sealer read them.
func (s *PostgresSealStore) ScanChain(ctx context.Context, sku string, fn func(ledger.SealedRow) error) error {
	rows, err := s.pool.Query(ctx, `
SELECT COALESCE(e.sku, s.sku), COALESCE(e.seq, s.seq), e.event_id IS NOT NULL, `+eventColumns+`,
       s.seq IS NOT NULL, COALESCE(s.prev_hash, ''), COALESCE(s.hash, ''), COALESCE(s.algorithm, ''), COALESCE(s.key_id, '')
FROM (SELECT * FROM ledger_entries WHERE $1 = '' OR sku = $1) e
FULL JOIN (SELECT * FROM ledger_seals WHERE $1 = '' OR sku = $1) s ON s.sku = e.sku AND s.seq = e.seq
ORDER BY 1, 2`, sku)
	if err != nil {
		return fmt.Errorf("read the ledger and its seals: %w", translate(err))
	}
	defer rows.Close()
	var (
		r                 ledger.SealedRow
		row               eventRow
		sl                domain.Seal
		algorithm         string
		hasRow, hasSealed bool
	)
	dest := append(append([]any{&r.SKU, &r.Seq, &hasRow}, row.dest()...), &hasSealed, &sl.PrevHash, &sl.Hash, &algorithm, &sl.KeyID)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("read the ledger and its seals: %w", translate(err))
		}
		r.Event, r.Seal = nil, nil
		if hasRow {
			e := row.event()
			r.Event = &e
		}
		if hasSealed {
			seal := sl
			seal.SKU, seal.Seq, seal.Algorithm = r.SKU, r.Seq, domain.SealAlgorithm(algorithm)
			r.Seal = &seal
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the ledger and its seals: %w", translate(err))
	}
	return nil
}

// Keyed says whether the ledger holds a keyed checkpoint: from then on
// only a sealer with a seal key may extend it.
func (s *PostgresSealStore) Keyed(ctx context.Context) (bool, error) {
	var keyed bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_checkpoints)`).Scan(&keyed); err != nil {
		return false, fmt.Errorf("read the seal checkpoints: %w", translate(err))
	}
	return keyed, nil
}

// Checkpoint writes the next checkpoint, of the heads of every SKU whose
// last seal is past its last checkpointed head, in one transaction under a
// transaction-scoped advisory lock, so checkpoints of several sealers stay
// numbered without gaps. It returns false, writing nothing, when no head
// moved: one index probe of each table per balances row.
func (s *PostgresSealStore) Checkpoint(ctx context.Context, next seal.CheckpointFunc) (cp domain.Checkpoint, written bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return cp, false, fmt.Errorf("checkpoint: %w", translate(err))
	}
	defer func() {
		if rbErr := tx.Rollback(context.WithoutCancel(ctx)); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) && err == nil {
			err = fmt.Errorf("checkpoint: %w", translate(rbErr))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('invledger.ledger_checkpoints', 0))`); err != nil {
		return cp, false, fmt.Errorf("checkpoint: %w", translate(err))
	}
	var prev domain.Checkpoint
	err = tx.QueryRow(ctx, `SELECT n, mac FROM ledger_checkpoints ORDER BY n DESC LIMIT 1`).Scan(&prev.N, &prev.MAC)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return cp, false, fmt.Errorf("checkpoint: the last one: %w", translate(err))
	}
	rows, err := tx.Query(ctx, `
SELECT b.sku, last.seq, last.hash FROM balances b
JOIN LATERAL (SELECT seq, hash FROM ledger_seals s WHERE s.sku = b.sku ORDER BY seq DESC LIMIT 1) last ON true
LEFT JOIN LATERAL (SELECT seq FROM ledger_checkpoint_heads h WHERE h.sku = b.sku ORDER BY n DESC LIMIT 1) cp ON true
WHERE last.seq > COALESCE(cp.seq, 0)
ORDER BY b.sku`)
	if err != nil {
		return cp, false, fmt.Errorf("checkpoint: heads: %w", translate(err))
	}
	heads, err := pgx.CollectRows(rows, pgx.RowToStructByPos[domain.SealHead])
	if err != nil {
		return cp, false, fmt.Errorf("checkpoint: heads: %w", translate(err))
	}
	if len(heads) == 0 {
		return cp, false, nil
	}
	cp = next(prev, heads)
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_checkpoints (n, prev_mac, algorithm, key_id, mac, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		cp.N, cp.PrevMAC, string(domain.SealHMACSHA256), cp.KeyID, cp.MAC, cp.At); err != nil {
		return cp, false, fmt.Errorf("checkpoint %d: %w", cp.N, translate(err))
	}
	skus, seqs, hashes := make([]string, len(cp.Heads)), make([]int64, len(cp.Heads)), make([]string, len(cp.Heads))
	for i, h := range cp.Heads {
		skus[i], seqs[i], hashes[i] = h.SKU, h.Seq, h.Hash
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ledger_checkpoint_heads (sku, n, seq, hash) SELECT sku, $1, seq, hash FROM unnest($2::text[], $3::bigint[], $4::text[]) AS h(sku, seq, hash)`,
		cp.N, skus, seqs, hashes); err != nil {
		return cp, false, fmt.Errorf("checkpoint %d: heads: %w", cp.N, translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return cp, false, fmt.Errorf("checkpoint %d: %w", cp.N, translate(err))
	}
	return cp, true, nil
}

// ScanCheckpoints calls fn for every checkpoint with its heads, in n
// order, streamed; a checkpoint whose heads were deleted comes with none.
func (s *PostgresSealStore) ScanCheckpoints(ctx context.Context, fn func(domain.Checkpoint) error) error {
	rows, err := s.pool.Query(ctx, `
SELECT c.n, c.prev_mac, c.key_id, c.mac, c.created_at, h.sku, h.seq, h.hash
FROM ledger_checkpoints c LEFT JOIN ledger_checkpoint_heads h ON h.n = c.n
ORDER BY c.n, h.sku`)
	if err != nil {
		return fmt.Errorf("read the seal checkpoints: %w", translate(err))
	}
	defer rows.Close()
	var (
		cp   domain.Checkpoint
		head struct {
			sku, hash *string
			seq       *int64
		}
		c domain.Checkpoint
	)
	flush := func() error {
		if cp.N == 0 {
			return nil
		}
		return fn(cp)
	}
	for rows.Next() {
		if err := rows.Scan(&c.N, &c.PrevMAC, &c.KeyID, &c.MAC, &c.At, &head.sku, &head.seq, &head.hash); err != nil {
			return fmt.Errorf("read the seal checkpoints: %w", translate(err))
		}
		if c.N != cp.N {
			if err := flush(); err != nil {
				return err
			}
			cp = c
			cp.Heads = nil
		}
		if head.sku != nil {
			cp.Heads = append(cp.Heads, domain.SealHead{SKU: *head.sku, Seq: *head.seq, Hash: *head.hash})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the seal checkpoints: %w", translate(err))
	}
	return flush()
}
