package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/wire"
)

// TestOperationsOverHTTPAndCLI: operations done through the API are
// recorded with the token's name, a repair with who asked for it, and the
// trail reads the same over GET /v1/skus/{sku}/operations and `audit
// operations`.
func TestOperationsOverHTTPAndCLI(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	s.sku("ops-1", 10)
	s.must(200, "POST", "/v1/skus/ops-1/close", aliceOp, "")
	conn, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	s.adjustedRows("ops-1") // the stocked event is projected
	if _, err := conn.Exec(context.Background(), `UPDATE balances SET balance = balance + 2 WHERE sku = 'ops-1'`); err != nil {
		t.Fatal(err)
	}
	if m := s.must(200, "POST", "/v1/reconcile", aliceOp, `{"sku":"ops-1","repair":true}`); fmt.Sprint(m["repaired"]) == "[]" {
		t.Fatalf("reconcile repaired nothing: %v", m)
	}

	page := s.must(200, "GET", "/v1/skus/ops-1/operations", auditorTok, "")
	var got []string
	for _, op := range page["operations"].([]any) {
		m := op.(map[string]any)
		got = append(got, fmt.Sprintf("%s by %s", m["action"], m["actor"]))
	}
	want := "[create by alice warm by alice close by alice rebuild by alice repair by alice]"
	if fmt.Sprint(got) != want || page["next_after"] != nil {
		t.Fatalf("operations: %v (next %v), want %s", got, page["next_after"], want)
	}
	for q, field := range map[string]string{"lmit=1": "lmit", "after=x": "after", "limit=0": "limit"} {
		if code, m := s.call("GET", "/v1/skus/ops-1/operations?"+q, auditorTok, ""); code != 400 || m["field"] != field {
			t.Errorf("?%s: %d %v, want 400 naming %s", q, code, m, field)
		}
	}
	if code, _ := s.call("GET", "/v1/skus/ops-1/operations", bobApp+"x", ""); code != 401 {
		t.Errorf("without a valid token: %d, want 401", code)
	}

	out, stderr, err := runCLIRaw("audit", "operations", "ops-1", "--format", "json", "--limit", "2", "--database-url", s.dbURL, "--log-level", "error")
	var cliPage wire.OperationPageJSON
	if err != nil || json.Unmarshal([]byte(out), &cliPage) != nil || len(cliPage.Operations) != 2 || cliPage.Operations[0].Actor != "alice" ||
		!strings.Contains(stderr, "--after") {
		t.Fatalf("audit operations: %v %s\n%s", err, stderr, out)
	}
}
