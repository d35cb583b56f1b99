package pgstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
)

func TestBalanceStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	balances := pgstore.NewPostgresBalanceStore(pool)
	if _, err := pgstore.NewPostgresProjectionStore(pool).AppendBatch(ctx, append(sale("a", 10, "u1"), sale("b", 4)...)); err != nil {
		t.Fatal(err)
	}
	if corrected, err := balances.RebuildBalance(ctx, mustSKU(t, "a")); err != nil || corrected {
		t.Fatalf("rebuild of a right row: %v %v, want no change", corrected, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE balances SET balance = 99, last_seq = 7 WHERE sku = 'a';
		DELETE FROM balances WHERE sku = 'b';
		INSERT INTO balances (sku, balance, last_seq) VALUES ('ghost', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	if skus, err := balances.BalanceSKUs(ctx); err != nil || !slices.Equal(skus, []string{"a", "b", "ghost"}) {
		t.Fatalf("balance skus: %v %v", skus, err)
	}
	for _, sku := range []string{"a", "b", "ghost"} {
		if corrected, err := balances.RebuildBalance(ctx, mustSKU(t, sku)); err != nil || !corrected {
			t.Fatalf("rebuild %s: %v %v, want corrected", sku, corrected, err)
		}
	}
	var a, aSeq, b, bSeq, rows int64
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT balance FROM balances WHERE sku = 'a'), (SELECT last_seq FROM balances WHERE sku = 'a'),
		(SELECT balance FROM balances WHERE sku = 'b'), (SELECT last_seq FROM balances WHERE sku = 'b'),
		(SELECT count(*) FROM balances)`).Scan(&a, &aSeq, &b, &bSeq, &rows); err != nil {
		t.Fatal(err)
	}
	if a != 9 || aSeq != 2 || b != 4 || bSeq != 1 || rows != 2 {
		t.Fatalf("balances after rebuild: a %d@%d, b %d@%d, %d rows; want a 9@2, b 4@1, 2 rows", a, aSeq, b, bSeq, rows)
	}
	if corrected, err := balances.RebuildBalance(ctx, mustSKU(t, "nothing")); err != nil || corrected {
		t.Fatalf("rebuild of a sku without rows: %v %v, want no change", corrected, err)
	}
}
