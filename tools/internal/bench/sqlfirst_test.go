package bench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

// TestPGTargetKeepsToItsSchema sells on the SQL-first target and checks
// that every relation it made is in its own schema and none in public, the
// default search_path where the ledger's tables are.
func TestPGTargetKeepsToItsSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := localstacktest.Postgres(t)
	pt, err := newPGTarget(ctx, dbURL, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := pt.prepare(ctx, "pg-test", 2); err != nil {
		t.Fatal(err)
	}
	w := &benchWorker{}
	for _, tc := range []struct {
		user, request string
		want          outcome
	}{
		{"u1", "r1", outSold}, {"u1", "r1", outReplayed}, {"u1", "r2", outAlready}, {"u2", "r3", outSold}, {"u3", "r4", outSoldOut},
	} {
		if o, _, err := pt.deduct(ctx, w, tc.user, tc.request); o != tc.want || err != nil {
			t.Fatalf("%s %s: %s %v, want %s", tc.user, tc.request, o, err, tc.want)
		}
	}
	if sold, remaining, err := pt.check(ctx); sold != 2 || remaining != 0 || err != nil {
		t.Fatalf("check: sold %d remaining %d %v, want 2 and 0", sold, remaining, err)
	}
	pt.close()

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]bool{}
	for rows.Next() {
		var schema, rel string
		if err := rows.Scan(&schema, &rel); err != nil {
			t.Fatal(err)
		}
		if schema != pgSchema {
			t.Errorf("relation %s.%s is outside schema %s", schema, rel, pgSchema)
		}
		made[rel] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !made["bench_stock"] || !made["bench_orders"] {
		t.Errorf("relations %v, want bench_stock and bench_orders in %s", made, pgSchema)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM invledger_bench.bench_stock) + (SELECT count(*) FROM invledger_bench.bench_orders)`).Scan(&left); err != nil || left != 0 {
		t.Errorf("close left %d rows (%v), want the run's rows deleted", left, err)
	}
}
