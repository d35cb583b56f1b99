package ledger_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
)

const (
	auditBenchSKUs  = 1000
	auditBenchUsers = 100_000
	// auditBenchStep is the time between two consecutive rows of the
	// ledger, so every SKU's rows spread over the whole timeline.
	auditBenchStep = time.Millisecond
)

// auditLedger is a ledger seeded with COPY: row i belongs to SKU i mod
// 1,000 and to one of 100,000 users, and occurs i ms after t0. Each SKU
// starts with its stocked row; every tenth later row releases the SKU's
// newest unreleased purchase, the others are purchases of one unit.
type auditLedger struct {
	s      *stacktest.Stack
	a      *ledger.Auditor
	t0     time.Time
	rows   int
	names  []string
	seqs   []int64
	stocks []int64
	held   [][]purchase
	rng    *rand.Rand
}

type purchase struct{ user, req string }

func newAuditLedger(b *testing.B) *auditLedger {
	s := stacktest.New(b)
	l := &auditLedger{s: s, a: ledger.NewAuditor(s.Audit, s.SKUs, s.Operations), t0: time.Now().Add(-24 * time.Hour).Truncate(time.Second),
		names: make([]string, auditBenchSKUs), seqs: make([]int64, auditBenchSKUs), stocks: make([]int64, auditBenchSKUs),
		held: make([][]purchase, auditBenchSKUs), rng: rand.New(rand.NewPCG(1, 2))}
	for i := range l.names {
		l.names[i] = fmt.Sprintf("bench-%04d", i)
	}
	if _, err := s.Pool.Exec(context.Background(), `INSERT INTO skus (sku, initial_stock, per_user_limit) SELECT unnest($1::text[]), 1000000, 1`, l.names); err != nil {
		b.Fatal(err)
	}
	return l
}

// grow appends rows until the ledger holds n, then vacuums, as autovacuum
// does for an insert-only table: the visibility map it sets is what lets
// balance-at read the index alone.
func (l *auditLedger) grow(b *testing.B, n int) {
	if n <= l.rows {
		return
	}
	ctx := context.Background()
	copied, err := l.s.Pool.CopyFrom(ctx, pgx.Identifier{"ledger_entries"},
		[]string{"event_id", "sku", "seq", "type", "delta", "qty", "balance_after", "user_id", "request_id", "actor", "occurred_at", "stream_id"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if l.rows == n {
				return nil, nil
			}
			return l.next(), nil
		}))
	if err != nil {
		b.Fatalf("seed the ledger: %d rows copied: %v", copied, err)
	}
	if _, err := l.s.Pool.Exec(ctx, `VACUUM ANALYZE ledger_entries`); err != nil {
		b.Fatal(err)
	}
}

func (l *auditLedger) next() []any {
	i := l.rows
	l.rows++
	k := i % auditBenchSKUs
	l.seqs[k]++
	var id [16]byte
	binary.BigEndian.PutUint64(id[8:], uint64(l.rows))
	var (
		typ              string
		user, req, actor any
		delta, qty       int64 = -1, 1
	)
	switch {
	case l.seqs[k] == 1:
		typ, actor, delta, qty = "stocked", "bench", 1_000_000, 1_000_000
	case l.seqs[k]%10 == 0 && len(l.held[k]) > 0:
		p := l.held[k][len(l.held[k])-1]
		l.held[k] = l.held[k][:len(l.held[k])-1]
		typ, user, req, delta = "released", p.user, p.req, 1
	default:
		p := purchase{user: "user-" + strconv.Itoa(l.rng.IntN(auditBenchUsers)), req: "req-" + strconv.Itoa(i)}
		l.held[k] = append(l.held[k], p)
		typ, user, req = "deducted", p.user, p.req
	}
	l.stocks[k] += delta
	return []any{pgtype.UUID{Bytes: id, Valid: true}, l.names[k], l.seqs[k], typ, delta, qty, l.stocks[k], user, req, actor,
		l.t0.Add(time.Duration(i) * auditBenchStep), "0-1"}
}

// auditBenchRows is the ledger's size for a run of b.N queries: b.N rows,
// so `make test`'s -benchtime 200x stays quick, or INVLEDGER_BENCH_ROWS if
// larger. INVLEDGER_BENCH_ROWS=1000000 measures the million-row
// ledger with any -benchtime.
func auditBenchRows(b *testing.B) int {
	rows := b.N
	if v := os.Getenv("INVLEDGER_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("INVLEDGER_BENCH_ROWS=%q must be a positive integer", v)
		}
		rows = max(rows, n)
	}
	return rows
}

// BenchmarkAuditQueries times balance-at on a random SKU at a random
// instant, and a user's purchases (first page) for a random user, over a
// ledger of max(b.N, INVLEDGER_BENCH_ROWS) rows spread over 1,000 SKUs and
// 100,000 users. Each op is one query through ledger.Auditor, SKU check
// included; the target is under 100 ms at 1,000,000 rows.
func BenchmarkAuditQueries(b *testing.B) {
	l := newAuditLedger(b)
	ctx := context.Background()
	b.Run("balance-at", func(b *testing.B) {
		l.grow(b, auditBenchRows(b))
		rng := rand.New(rand.NewPCG(3, 4))
		b.ResetTimer()
		for range b.N {
			at := l.t0.Add(time.Duration(rng.IntN(l.rows)) * auditBenchStep)
			if _, err := l.a.BalanceAt(ctx, l.names[rng.IntN(auditBenchSKUs)], at); err != nil {
				b.Fatal(err)
			}
		}
		reportAudit(b, l.rows)
	})
	b.Run("user-purchases", func(b *testing.B) {
		l.grow(b, auditBenchRows(b))
		rng := rand.New(rand.NewPCG(5, 6))
		b.ResetTimer()
		for range b.N {
			user := "user-" + strconv.Itoa(rng.IntN(auditBenchUsers))
			if _, err := l.a.UserEvents(ctx, ledger.UserQuery{User: user}); err != nil {
				b.Fatal(err)
			}
		}
		reportAudit(b, l.rows)
	})
}

func reportAudit(b *testing.B, rows int) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(rows), "ledger_rows")
}
