package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/ledger"
)

// TestReadCommandsTakeFormatAndRelativeInstants: reconcile and
// dead-letters list print table, json or csv, and balance-at takes --at
// now and a duration from now (issue 17, F16).
func TestReadCommandsTakeFormatAndRelativeInstants(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "fmt-1", 5, 1)
	if _, err := s.Service.Deduct(context.Background(), ledger.MustDeductCommand("fmt-1", "u1", 1, "r1")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)

	out, _, err := runCLI(t, s, "reconcile", "--sku", "fmt-1")
	if err != nil || !strings.HasPrefix(out, "reconciliation run ") {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	var rep struct {
		RunID   int64 `json:"run_id"`
		Checked int   `json:"checked"`
	}
	out, _, err = runCLI(t, s, "reconcile", "--sku", "fmt-1", "--format", "json")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.RunID == 0 || rep.Checked != 1 {
		t.Fatalf("reconcile --format json: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, s, "reconcile", "--format", "csv")
	if err != nil || out != "sku,class,detail,repaired,repair_error\n" {
		t.Fatalf("reconcile --format csv: %v\n%q", err, out)
	}
	out, _, err = runCLI(t, s, "dead-letters", "list", "--format", "csv")
	if err != nil || out != "id,stream,stream_id,status,created_at,error\n" {
		t.Fatalf("dead-letters list --format csv: %v\n%q", err, out)
	}
	for at, want := range map[string]string{"now": "4", "+1m": "4", "-1h": "0"} {
		out, _, err = runCLI(t, s, "audit", "balance-at", "fmt-1", "--at", at, "--format", "csv")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 2 || !strings.HasSuffix(lines[1], ","+want) {
			t.Fatalf("balance-at --at %s: %v\n%s", at, err, out)
		}
	}
	if _, _, err = runCLI(t, s, "reconcile", "--format", "xml"); exitCode(err) != exitBadInput {
		t.Fatalf("reconcile --format xml: %v, want exit %d", err, exitBadInput)
	}
}
