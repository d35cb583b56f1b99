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
// the append-only ledger_entries it links, and reads both for audit verify.
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
	err = tx.QueryRow(ctx, `SELECT seq, prev_hash, hash, algorithm FROM ledger_seals WHERE sku = $1 ORDER BY seq DESC LIMIT 1`, sku).
		Scan(&last.Seq, &last.PrevHash, &last.Hash, &algorithm)
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
	seqs, prevs, hashes, algorithms := make([]int64, n), make([]string, n), make([]string, n), make([]string, n)
	for i, sl := range seals {
		seqs[i], prevs[i], hashes[i], algorithms[i] = sl.Seq, sl.PrevHash, sl.Hash, string(sl.Algorithm)
	}
	if _, err := tx.Exec(ctx, `
INSERT INTO ledger_seals (sku, seq, prev_hash, hash, algorithm)
SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[])`, sku, seqs, prevs, hashes, algorithms); err != nil {
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
       s.seq IS NOT NULL, COALESCE(s.prev_hash, ''), COALESCE(s.hash, ''), COALESCE(s.algorithm, '')
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
	dest := append(append([]any{&r.SKU, &r.Seq, &hasRow}, row.dest()...), &hasSealed, &sl.PrevHash, &sl.Hash, &algorithm)
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
