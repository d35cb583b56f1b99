package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestAuditCommands(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "cli-a", 10, 1)
	for _, u := range []string{"ann", "=HYPERLINK(1)", "cy"} {
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("cli-a", u, 1, "r-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand("cli-a", "cy", "r-cy", "changed mind")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)

	// history: a table by default, paged with a hint on stderr.
	out, stderr, err := runCLI(t, s, "audit", "history", "cli-a", "--limit", "2")
	if err != nil {
		t.Fatalf("audit history: %v %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SKU ") || !strings.Contains(lines[0], "BALANCE_AFTER") ||
		!strings.Contains(lines[1], "stocked") || !strings.Contains(lines[2], "ann") {
		t.Fatalf("history table:\n%s", out)
	}
	if !strings.Contains(stderr, "--after 2") {
		t.Fatalf("history stderr %q lacks the next page's --after", stderr)
	}
	out, _, err = runCLI(t, s, "audit", "history", "cli-a", "--after", "2", "--format", "json")
	var page wire.HistoryPageJSON
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Events) != 3 || page.Events[2].Type != string(domain.EventReleased) || page.NextAfter != nil {
		t.Fatalf("history json: %v\n%s", err, out)
	}

	// csv: a header, one record per row, formulas defused, negative deltas kept.
	out, _, err = runCLI(t, s, "audit", "history", "cli-a", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(records) != 6 || records[0][0] != "sku" || records[0][13] != "event_id" {
		t.Fatalf("history csv: %v\n%s", err, out)
	}
	if records[3][6] != "'=HYPERLINK(1)" || records[3][3] != "-1" {
		t.Fatalf("csv row %q: want the formula defused and the delta -1", records[3])
	}

	// buyers, balance-at and user.
	out, _, err = runCLI(t, s, "audit", "buyers", "cli-a", "--format", "csv")
	if err != nil || out != "user_id,qty\n'=HYPERLINK(1),1\nann,1\n" {
		t.Fatalf("buyers csv: %v\n%q", err, out)
	}
	out, _, err = runCLI(t, s, "audit", "buyers", "cli-a")
	if err != nil || !strings.Contains(out, "USER_ID") || !strings.Contains(out, "=HYPERLINK(1)  1") {
		t.Fatalf("buyers table: %v\n%s", err, out)
	}
	var bal wire.StockAtJSON
	out, _, err = runCLI(t, s, "audit", "balance-at", "cli-a", "--at", time.Now().Add(time.Minute).Format(time.RFC3339), "--format", "json")
	if err != nil || json.Unmarshal([]byte(out), &bal) != nil || bal.Stock != 8 {
		t.Fatalf("balance-at: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, s, "audit", "balance-at", "cli-a", "--at", "2000-01-01T00:00:00Z")
	if err != nil || !strings.Contains(out, "cli-a  2000-01-01T00:00:00Z  0") {
		t.Fatalf("balance-at before the sale: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, s, "audit", "user", "cy")
	if err != nil || strings.Count(out, "cli-a") != 2 || !strings.Contains(out, "changed mind") {
		t.Fatalf("user table: %v\n%s", err, out)
	}
	_, stderr, err = runCLI(t, s, "audit", "user", "cy", "--limit", "1")
	if err != nil || !strings.Contains(stderr, "more rows follow: run again with --after ") {
		t.Fatalf("user paged: %v %q", err, stderr)
	}
	cursor := strings.TrimSpace(stderr[strings.LastIndex(stderr, " ")+1:])
	out, stderr, err = runCLI(t, s, "audit", "user", "cy", "--limit", "1", "--after", cursor)
	if err != nil || !strings.Contains(out, "released") || stderr != "" {
		t.Fatalf("user second page: %v\n%s%s", err, out, stderr)
	}

	// Bad input names the flag or field and exits 2.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "history", "cli-a", "--format", "xml"}, "--format"},
		{[]string{"audit", "history", "cli-a", "--limit", "0"}, "--limit"},
		{[]string{"audit", "user", "cy", "--limit", "1001"}, "--limit"},
		{[]string{"audit", "history", "cli-a", "--after", "-1"}, "after"},
		{[]string{"audit", "history", "bad{"}, "sku"},
		{[]string{"audit", "balance-at", "cli-a", "--at", "noon"}, "at"},
		{[]string{"audit", "user", "cy", "--after", "page-2"}, "after"},
	} {
		_, _, err := runCLI(t, s, tc.args...)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want+":") || exitCode(err) != exitBadInput {
			t.Fatalf("%v: err %v, want a field error naming %s with exit status %d", tc.args, err, tc.want, exitBadInput)
		}
	}
	if _, _, err := runCLI(t, s, "audit", "buyers", "ghost"); !errors.Is(err, domain.ErrNotFound) || exitCode(err) != 2 {
		t.Fatalf("buyers of an undefined sku: %v", err)
	}
}

func TestAuditHelp(t *testing.T) {
	for _, args := range [][]string{{"audit"}, {"audit", "history"}, {"audit", "buyers"}, {"audit", "balance-at"}, {"audit", "user"}} {
		var out strings.Builder
		cmd := NewRootCmd()
		cmd.SetArgs(append(args, "--help"))
		cmd.SetOut(&out)
		if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "--format") {
			t.Fatalf("%v --help: %v\n%s", args, err, out.String())
		}
	}
}

// TestAuditTablesListHolds checks that a SKU's and a user's tables name
// each hold event's hold, the status it gave the hold, its deadline and
// order, and leave those columns empty for other rows.
func TestAuditTablesListHolds(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	s.SKU(t, "cli-h", 10, 2)
	sku, err := domain.NewSKUID("cli-h")
	if err != nil {
		t.Fatal(err)
	}
	user, _ := domain.NewUserID("hana")
	qty, _ := domain.NewQuantity(1)
	cfg := domain.HoldConfig{}
	cfg.SetDefaults()
	seconds := int64(600)
	ttl, err := cfg.NewHoldTTL(&seconds)
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(req string) domain.Hold {
		t.Helper()
		r, _ := domain.NewRequestID(req)
		h, err := s.Inventory.Reserve(ctx, sku, user, qty, r, ttl, "", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	open, ended := reserve("r-open"), reserve("r-ended")
	id, _ := domain.NewHoldID(ended.HoldID)
	if _, err := s.Inventory.CancelHold(ctx, sku, id, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand("cli-h", "hana", 1, "r-sold")); err != nil {
		t.Fatal(err)
	}
	// ivy buys twice by reserve and confirm, and releases the second.
	ivy, _ := domain.NewUserID("ivy")
	for _, req := range []string{"r-i1", "r-i2"} {
		r, _ := domain.NewRequestID(req)
		h, err := s.Inventory.Reserve(ctx, sku, ivy, qty, r, ttl, "", uuid.NewString())
		if err != nil {
			t.Fatal(err)
		}
		id, _ := domain.NewHoldID(h.HoldID)
		if _, err := s.Inventory.ConfirmHold(ctx, sku, id, uuid.NewString()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Service.Release(ctx, ledger.MustReleaseCommand("cli-h", "ivy", "r-i2", "")); err != nil {
		t.Fatal(err)
	}
	s.ProjectStreams(t)

	// buyers counts as the per-user limit does: hana's open hold and
	// purchase, ivy's confirmed hold, not her released one.
	out, _, err := runCLI(t, s, "audit", "buyers", "cli-h", "--format", "csv")
	if err != nil || out != "user_id,qty\nhana,2\nivy,1\n" {
		t.Fatalf("buyers csv: %v\n%q", err, out)
	}

	out, _, err = runCLI(t, s, "audit", "history", "cli-h", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(records) != 11 {
		t.Fatalf("history csv: %v\n%s", err, out)
	}
	tail := func(r []string) string { return strings.Join(r[len(r)-4:], ",") }
	want := []string{
		"hold_id,status,expires_at,order_id",
		",,,", // stocked
		open.HoldID + ",held," + open.ExpiresAt.UTC().Format(time.RFC3339Nano) + ",",
		ended.HoldID + ",held," + ended.ExpiresAt.UTC().Format(time.RFC3339Nano) + ",",
		ended.HoldID + ",cancelled,,",
		",,,", // deducted
	}
	for i, w := range want {
		if got := tail(records[i]); got != w {
			t.Errorf("history csv row %d ends %q, want %q", i, got, w)
		}
	}
	out, _, err = runCLI(t, s, "audit", "user", "hana")
	if err != nil || !strings.Contains(out, "HOLD_ID") || strings.Count(out, open.HoldID) != 1 || strings.Count(out, ended.HoldID) != 2 ||
		!strings.Contains(out, "cancelled") || !strings.Contains(out, "deducted") {
		t.Fatalf("user table: %v\n%s", err, out)
	}
}
