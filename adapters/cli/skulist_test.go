package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger"
)

// TestSKUListAndPagedBuyers: `sku list` and `audit buyers` page with
// --limit and --after, naming the next page's --after on stderr; `sku
// show` prints the ledger watermark.
func TestSKUListAndPagedBuyers(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "c-live", 10, 1)
	for _, u := range []string{"ann", "bo", "cy"} {
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("c-live", u, 1, "r-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: "c-cold", Stock: 4}); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)

	out, stderr, err := runCLI(t, s, "sku", "list", "--limit", "1")
	if err != nil || !strings.Contains(out, "SKU") || !strings.Contains(out, "c-cold") || strings.Contains(out, "c-live") ||
		!strings.Contains(stderr, "run again with --after c-cold") {
		t.Fatalf("sku list page 1: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runCLI(t, s, "sku", "list", "--after", "c-cold", "--format", "json")
	var page wire.SKUPageJSON
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.SKUs) != 1 || page.NextAfter != nil || stderr != "" {
		t.Fatalf("sku list page 2: %v\n%s%s", err, out, stderr)
	}
	if live := page.SKUs[0]; live.SKU != "c-live" || live.State != "open" || live.RedisStock == nil || *live.RedisStock != 7 ||
		live.LedgerSeq == nil || *live.LedgerSeq != 4 {
		t.Fatalf("c-live listed as %+v", live)
	}
	out, _, err = runCLI(t, s, "sku", "list", "--format", "csv")
	records, cerr := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || cerr != nil || len(records) != 3 || strings.Join(records[1], ",") != "c-cold,4,1,not_warmed,,,," {
		t.Fatalf("sku list csv: %v %v\n%s", err, cerr, out)
	}

	out, stderr, err = runCLI(t, s, "audit", "buyers", "c-live", "--limit", "2")
	if err != nil || !strings.Contains(out, "ann") || !strings.Contains(out, "bo") || strings.Contains(out, "cy") ||
		!strings.Contains(stderr, "run again with --after bo") {
		t.Fatalf("buyers page 1: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = runCLI(t, s, "audit", "buyers", "c-live", "--limit", "2", "--after", "bo", "--format", "csv")
	if err != nil || out != "user_id,qty\ncy,1\n" || stderr != "" {
		t.Fatalf("buyers page 2: %v\n%q %q", err, out, stderr)
	}

	out, _, err = runCLI(t, s, "sku", "show", "c-live")
	var show map[string]any
	if err != nil || json.Unmarshal([]byte(out), &show) != nil || show["ledger_watermark"] != float64(4) || show["ledger_seq"] != float64(4) {
		t.Fatalf("sku show: %v\n%s", err, out)
	}

	for _, args := range [][]string{{"sku", "list", "--limit", "0"}, {"sku", "list", "--format", "xml"}, {"sku", "list", "--after", "a/b"},
		{"audit", "buyers", "c-live", "--limit", "1001"}, {"audit", "buyers", "c-live", "--after", " bo"}} {
		if _, _, err := runCLI(t, s, args...); exitCode(err) != exitBadInput {
			t.Fatalf("%v: %v (exit %d), want exit %d", args, err, exitCode(err), exitBadInput)
		}
	}
}

// TestSKUShowFormats prints one SKU as JSON by default, as it always did,
// and as a table or CSV on request.
func TestSKUShowFormats(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "show-1", 7, 1)
	out, _, err := runCLI(t, s, "sku", "show", "show-1")
	var m map[string]any
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m["redis_stock"] != float64(7) || m["state"] != "open" {
		t.Fatalf("sku show: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, s, "sku", "show", "show-1", "--format", "csv")
	if err != nil || !strings.HasPrefix(out, "sku,state,initial_stock,per_user_limit,redis_stock,redis_seq,") || !strings.Contains(out, "\nshow-1,open,7,1,7,1,") {
		t.Fatalf("sku show --format csv: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, s, "sku", "show", "show-1", "--format", "table")
	if err != nil || !strings.HasPrefix(out, "SKU ") || !strings.Contains(out, "show-1") {
		t.Fatalf("sku show --format table: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, s, "sku", "show", "show-1", "--format", "yaml"); exitCode(err) != 5 {
		t.Fatalf("sku show --format yaml: %v (exit %d), want bad input", err, exitCode(err))
	}
}
