package ledger_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// seedLedger writes a consistent ledger of rows events spread over skus SKUs
// straight into PostgreSQL with COPY: per SKU a stocked event, then
// purchases by distinct users, every tenth event releasing the latest one.
func seedLedger(b *testing.B, s *stacktest.Stack, rows, skus int) {
	b.Helper()
	ctx := context.Background()
	names := make([]string, skus)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%04d", i)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO skus (sku, initial_stock, per_user_limit) SELECT unnest($1::text[]), 0, 1`, names); err != nil {
		b.Fatal(err)
	}
	// SKU i gets rows/skus events, the first rows%skus one more.
	count := func(i int) int { return rows/skus + min(1, max(0, rows%skus-i)) }
	var (
		sku, seq, n int
		stock       int64
		held        []int // seqs of purchases not released, newest last
		t0          = time.Now()
	)
	next := func() []any {
		if seq == count(sku) {
			sku, seq, held = sku+1, 0, held[:0]
		}
		seq++
		n++
		var id [16]byte
		binary.BigEndian.PutUint64(id[8:], uint64(n))
		var typ, user, req, actor any
		var delta, qty int64
		switch {
		case seq == 1:
			typ, actor, stock = "stocked", "bench", int64(count(sku))
			delta, qty = stock, stock
		case seq%10 == 0 && len(held) > 0:
			p := held[len(held)-1]
			held = held[:len(held)-1]
			typ, user, req, delta, qty = "released", fmt.Sprintf("user-%d", p), fmt.Sprintf("req-%d", p), 1, 1
			stock++
		default:
			held = append(held, seq)
			typ, user, req, delta, qty = "deducted", fmt.Sprintf("user-%d", seq), fmt.Sprintf("req-%d", seq), -1, 1
			stock--
		}
		return []any{pgtype.UUID{Bytes: id, Valid: true}, names[sku], int64(seq), typ, delta, qty, stock, user, req, actor, nil, t0, "0-1"}
	}
	copied, err := s.Pool.CopyFrom(ctx, pgx.Identifier{"ledger_entries"},
		[]string{"event_id", "sku", "seq", "type", "delta", "qty", "balance_after", "user_id", "request_id", "actor", "reason", "occurred_at", "stream_id"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if n == rows {
				return nil, nil
			}
			return next(), nil
		}))
	if err != nil || copied != int64(rows) {
		b.Fatalf("seed the ledger: %d rows, %v", copied, err)
	}
	if _, err := s.Pool.Exec(ctx, `ANALYZE ledger_entries`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRestoreRedis restores b.N ledger rows, spread over up to 1,000
// SKUs, into an empty Redis with RestoreAll: one op is one ledger row.
// -benchtime 1000000x measures the million-row restore.
func BenchmarkRestoreRedis(b *testing.B) {
	s := stacktest.New(b)
	skus := min(1000, max(1, b.N/10))
	seedLedger(b, s, b.N, skus)
	rec := s.Recovery(b)
	b.ResetTimer()
	report, err := rec.RestoreAll(context.Background(), nil)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if report.Rows != int64(b.N) || report.SKUs != skus {
		b.Fatalf("restored %d rows of %d skus, want %d of %d", report.Rows, report.SKUs, b.N, skus)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
