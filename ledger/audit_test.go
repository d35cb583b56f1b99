package ledger_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// auditSale runs a small sale on two SKUs with releases and a rebuy, waits
// between steps so every event has its own instant, and projects it.
func auditSale(t *testing.T, s *stacktest.Stack) {
	t.Helper()
	ctx := context.Background()
	s.SKU(t, "aud-1", 10, 2)
	s.SKU(t, "aud-2", 5, 1)
	type step struct {
		release     bool
		sku, user   string
		qty         int64
		req, reason string
	}
	for _, st := range []step{
		{sku: "aud-1", user: "ann", qty: 2, req: "ann-1"},
		{sku: "aud-1", user: "bob", qty: 1, req: "bob-1"},
		{sku: "aud-1", user: "cy", qty: 1, req: "cy-1"},
		{sku: "aud-2", user: "cy", qty: 1, req: "cy-2"},
		{release: true, sku: "aud-1", user: "bob", req: "bob-1", reason: "payment timeout"},
		{sku: "aud-1", user: "dan", qty: 1, req: "dan-1"},
		{sku: "aud-1", user: "dan", qty: 1, req: "dan-2"},
		{release: true, sku: "aud-1", user: "dan", req: "dan-1", reason: "returned"},
		{sku: "aud-1", user: "bob", qty: 1, req: "bob-2"},
		{sku: "aud-2", user: "bob", qty: 1, req: "bob-3"},
		{release: true, sku: "aud-2", user: "cy", req: "cy-2"},
	} {
		time.Sleep(2 * time.Millisecond)
		var err error
		if st.release {
			_, err = s.Service.Release(ctx, ledger.MustReleaseCommand(st.sku, st.user, st.req, st.reason))
		} else {
			_, err = s.Service.Deduct(ctx, ledger.MustDeductCommand(st.sku, st.user, st.qty, st.req))
		}
		if err != nil {
			t.Fatalf("%+v: %v", st, err)
		}
	}
	s.ProjectStreams(t)
}

// appendAdjustments appends adjusted rows after the SKU's last one, as the
// projector appends the events of approved adjustments: signed deltas
// with the requester and approver as actor, and seals them: the stack's
// sealer ran before they were appended.
func appendAdjustments(t *testing.T, s *stacktest.Stack, a *ledger.Auditor, sku string, deltas ...int64) {
	t.Helper()
	ctx := context.Background()
	page, err := a.History(ctx, ledger.HistoryQuery{SKU: sku, Limit: ledger.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	last := page.Events[len(page.Events)-1]
	seq, stock, at := last.Seq, last.BalanceAfter, last.OccurredAt
	var events []domain.Event
	for _, d := range deltas {
		seq, stock, at = seq+1, stock+d, at.Add(time.Second)
		events = append(events, domain.Event{ID: uuid.NewString(), Type: domain.EventAdjusted, SKU: sku, Seq: seq,
			Qty: max(d, -d), Delta: d, Balance: stock, Actor: "olga+adam", Reason: "recount", OccurredAt: at, StreamID: "0-1"})
	}
	if _, err := s.Projection.AppendBatch(ctx, events); err != nil {
		t.Fatal(err)
	}
	s.Seal(t)
}

func allHistory(t *testing.T, a *ledger.Auditor, sku string, limit int) []ledger.AuditEntry {
	t.Helper()
	var (
		out   []ledger.AuditEntry
		after int64
	)
	for {
		page, err := a.History(context.Background(), ledger.HistoryQuery{SKU: sku, After: after, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > limit {
			t.Fatalf("page of %d rows, limit %d", len(page.Events), limit)
		}
		out = append(out, page.Events...)
		if page.NextAfter == nil {
			return out
		}
		if len(page.Events) != limit || *page.NextAfter != page.Events[len(page.Events)-1].Seq {
			t.Fatalf("page of %d rows ends at seq %d but next_after is %d", len(page.Events), page.Events[len(page.Events)-1].Seq, *page.NextAfter)
		}
		after = *page.NextAfter
	}
}

func TestAuditQueriesFoldASaleWithReleasesAndAdjustments(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	a := ledger.NewAuditor(s.Audit, s.SKUs, s.Operations)
	auditSale(t, s)
	appendAdjustments(t, s, a, "aud-1", +5, -3)

	// history: every row once, in seq order, with every column.
	rows := allHistory(t, a, "aud-1", ledger.MaxAuditLimit)
	if want := len(s.StreamEvents(t, "aud-1")) + 2; len(rows) != want {
		t.Fatalf("history has %d rows, want %d", len(rows), want)
	}
	for i, e := range rows {
		if e.Seq != int64(i+1) || e.SKU != "aud-1" || e.EventID == "" || e.StreamID == "" || e.OccurredAt.IsZero() || e.RecordedAt.IsZero() ||
			e.Hash == "" || i > 0 && e.PrevHash != rows[i-1].Hash {
			t.Fatalf("row %d: %+v", i, e)
		}
	}
	if r := rows[4]; r.Type != domain.EventReleased || r.UserID != "bob" || r.RequestID != "bob-1" || r.Reason != "payment timeout" || r.Delta != 1 || r.Qty != 1 {
		t.Fatalf("release row: %+v", r)
	}
	if r := rows[len(rows)-1]; r.Type != domain.EventAdjusted || r.Delta != -3 || r.Actor != "olga+adam" || r.UserID != "" {
		t.Fatalf("adjusted row: %+v", r)
	}
	for _, limit := range []int{1, 3, len(rows)} { // len(rows): one full page, then none
		if got := allHistory(t, a, "aud-1", limit); !slices.EqualFunc(got, rows, sameEntry) {
			t.Fatalf("pages of %d differ from the whole history", limit)
		}
	}
	if page, err := a.History(ctx, ledger.HistoryQuery{SKU: "aud-1", After: int64(len(rows))}); err != nil || len(page.Events) != 0 || page.NextAfter != nil {
		t.Fatalf("history after the last seq: %+v %v", page, err)
	}

	// The same rows folded by the domain's rules: the reference below.
	events := make([]domain.Event, len(rows))
	for i, e := range rows {
		events[i] = domain.Event{ID: e.EventID, Type: e.Type, SKU: e.SKU, Seq: e.Seq, Qty: e.Qty, Delta: e.Delta,
			Balance: e.BalanceAfter, User: e.UserID, RequestID: e.RequestID}
	}
	fold, err := domain.Fold("aud-1", events)
	if err != nil {
		t.Fatal(err)
	}
	if fold.Stock != 10-2-1-1+1-1-1+1-1+5-3 {
		t.Fatalf("fold stock %d", fold.Stock)
	}

	// balance-at, checked at instants around every event against a fold by
	// occurred_at computed here.
	stockAt := func(at time.Time) int64 {
		var sum int64
		for _, e := range rows {
			if !e.OccurredAt.After(at) {
				sum += e.Delta
			}
		}
		return sum
	}
	check := func(at time.Time, want int64) {
		t.Helper()
		got, err := a.BalanceAt(ctx, "aud-1", at)
		if err != nil || got.Stock != want || got.SKU != "aud-1" || !got.At.Equal(at) {
			t.Fatalf("balance at %s: %+v %v, want %d", at.Format(time.RFC3339Nano), got, err, want)
		}
	}
	check(rows[0].OccurredAt.Add(-time.Microsecond), 0) // before the SKU existed
	check(rows[0].OccurredAt.Add(-24*time.Hour), 0)
	for i, e := range rows {
		if i > 0 && !e.OccurredAt.After(rows[i-1].OccurredAt) {
			t.Fatalf("seq %d did not occur after seq %d", e.Seq, rows[i-1].Seq)
		}
		check(e.OccurredAt, stockAt(e.OccurredAt))
		check(e.OccurredAt, e.BalanceAfter) // at its instant, the stock is the balance the row carries
		check(e.OccurredAt.Add(-time.Microsecond), stockAt(e.OccurredAt.Add(-time.Microsecond)))
	}
	check(rows[len(rows)-1].OccurredAt.Add(time.Hour), fold.Stock)
	// The same instant in another zone is the same instant.
	mid := rows[6].OccurredAt.In(time.FixedZone("UTC+8", 8*3600))
	check(mid, rows[6].BalanceAfter)

	// buyers: the domain fold's, and they survive the archive of Redis's set.
	buyers, err := a.Buyers(ctx, ledger.BuyersQuery{SKU: "aud-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := holdings(buyers.Buyers), map[string]int64{"ann": 2, "bob": 1, "cy": 1, "dan": 1}; !maps.Equal(got, want) || !maps.Equal(got, fold.Buyers) {
		t.Fatalf("buyers of aud-1: %v, want %v (domain fold %v)", got, want, fold.Buyers)
	}
	if !slices.IsSortedFunc(buyers.Buyers, func(x, y ledger.Holding) int { return strings.Compare(x.UserID, y.UserID) }) {
		t.Fatalf("buyers not ordered by user: %v", buyers.Buyers)
	}
	arch := s.Archiver(t)
	if _, err := arch.CloseSKU(ctx, "aud-2"); err != nil {
		t.Fatal(err)
	}
	catchUp(t, s) // the closed event
	if _, err := arch.ArchiveBuyers(ctx, "aud-2"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Counts(t, "aud-2")); n != 0 {
		t.Fatalf("%d buyers of aud-2 are still in Redis after archive-buyers", n)
	}
	if b, err := a.Buyers(ctx, ledger.BuyersQuery{SKU: "aud-2"}); err != nil || len(b.Buyers) != 1 || b.Buyers[0] != (ledger.Holding{UserID: "bob", Qty: 1}) {
		t.Fatalf("buyers of aud-2 after archive-buyers: %+v %v", b, err)
	}

	// user: purchases and releases across SKUs by time, paged.
	page, err := a.UserEvents(ctx, ledger.UserQuery{User: "cy"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Events {
		got = append(got, e.SKU+"/"+string(e.Type)+"/"+e.RequestID)
	}
	if want := []string{"aud-1/deducted/cy-1", "aud-2/deducted/cy-2", "aud-2/released/cy-2"}; !slices.Equal(got, want) || page.NextAfter != nil || page.UserID != "cy" {
		t.Fatalf("cy's events: %v next %v, want %v", got, page.NextAfter, want)
	}
	whole, err := a.UserEvents(ctx, ledger.UserQuery{User: "bob"})
	if err != nil || len(whole.Events) != 4 {
		t.Fatalf("bob's events: %+v %v", whole, err)
	}
	var paged []ledger.AuditEntry
	for after := ""; ; {
		p, err := a.UserEvents(ctx, ledger.UserQuery{User: "bob", After: after, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, p.Events...)
		if p.NextAfter == nil {
			break
		}
		after = *p.NextAfter
	}
	if !slices.EqualFunc(paged, whole.Events, sameEntry) {
		t.Fatalf("bob's events a row at a time differ from one page")
	}
	if p, err := a.UserEvents(ctx, ledger.UserQuery{User: "nobody"}); err != nil || p.Events == nil || len(p.Events) != 0 {
		t.Fatalf("events of an unknown user: %+v %v, want an empty list", p, err)
	}
}

func TestAuditRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	a := ledger.NewAuditor(s.Audit, s.SKUs, s.Operations)
	s.SKU(t, "aud-in", 5, 1)
	now := time.Now()
	field := func(want string, err error) {
		t.Helper()
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != want || !errors.Is(err, domain.ErrInvalidInput) {
			t.Fatalf("err = %v, want a field error naming %s", err, want)
		}
	}
	for _, q := range []ledger.HistoryQuery{{SKU: "bad{"}, {SKU: ""}} {
		_, err := a.History(ctx, q)
		field("sku", err)
	}
	_, err := a.History(ctx, ledger.HistoryQuery{SKU: "aud-in", After: -1})
	field("after", err)
	for _, l := range []int{-1, ledger.MaxAuditLimit + 1} {
		_, err := a.History(ctx, ledger.HistoryQuery{SKU: "aud-in", Limit: l})
		field("limit", err)
		_, err = a.UserEvents(ctx, ledger.UserQuery{User: "u", Limit: l})
		field("limit", err)
	}
	if res, err := a.BalanceAt(ctx, "aud-in", time.Time{}); err != nil || res.Stock != 0 {
		t.Fatalf("balance at year 1: %+v %v, want 0", res, err) // issue 10: an instant like any other
	}
	_, err = a.BalanceAt(ctx, "no braces{}", now)
	field("sku", err)
	_, err = a.Buyers(ctx, ledger.BuyersQuery{SKU: "a/b"})
	field("sku", err)
	_, err = a.UserEvents(ctx, ledger.UserQuery{User: ""})
	field("user_id", err)
	_, err = a.UserEvents(ctx, ledger.UserQuery{User: "u\n"})
	field("user_id", err)
	for _, c := range []string{"x", "12_", "_" + uuid.NewString(), "12_not-a-uuid", "1e3_" + uuid.NewString(), "-9223372036854775808_" + uuid.NewString()} {
		_, err = a.UserEvents(ctx, ledger.UserQuery{User: "u", After: c})
		field("after", err)
	}
	at0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, in := range []string{"", "yesterday", "2026-05-01", "2026-05-01 12:00:00Z", "1714564800", "Now", "5m", "-5", "- 5m"} {
		_, err := ledger.ParseInstant(in, at0)
		field("at", err)
	}
	if _, err := ledger.ParseInstant("2026-05-01T20:00:00 08:00", at0); err == nil || !strings.Contains(err.Error(), "%2B") {
		t.Fatalf("an offset whose + a URL turned into a space: %v, want a hint to write %%2B", err)
	}
	for in, want := range map[string]time.Time{
		"2026-05-01T20:00:00.5+08:00": time.Date(2026, 5, 1, 12, 0, 0, 5e8, time.UTC),
		"now":                         at0, // issue 17, F16: --at now and relative instants
		"-5m":                         at0.Add(-5 * time.Minute),
		"+1h30m":                      at0.Add(90 * time.Minute),
	} {
		if at, err := ledger.ParseInstant(in, at0); err != nil || !at.Equal(want) {
			t.Fatalf("ParseInstant(%q): %v %v, want %v", in, at, err, want)
		}
	}

	// A SKU that was never defined is not found, rather than empty.
	for name, call := range map[string]func() error{
		"history":    func() error { _, err := a.History(ctx, ledger.HistoryQuery{SKU: "ghost"}); return err },
		"buyers":     func() error { _, err := a.Buyers(ctx, ledger.BuyersQuery{SKU: "ghost"}); return err },
		"balance-at": func() error { _, err := a.BalanceAt(ctx, "ghost", at0); return err },
	} {
		if err := call(); !errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "never defined") {
			t.Fatalf("%s of an undefined sku: %v, want not found", name, err)
		}
	}
	// Defined but never warmed: no rows, stock 0, no buyers.
	if _, _, err := s.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: "aud-cold", Stock: 3}); err != nil {
		t.Fatal(err)
	}
	if p, err := a.History(ctx, ledger.HistoryQuery{SKU: "aud-cold"}); err != nil || len(p.Events) != 0 || p.Events == nil {
		t.Fatalf("history of an unwarmed sku: %+v %v", p, err)
	}
	if b, err := a.BalanceAt(ctx, "aud-cold", at0); err != nil || b.Stock != 0 {
		t.Fatalf("balance of an unwarmed sku: %+v %v", b, err)
	}
	if b, err := a.Buyers(ctx, ledger.BuyersQuery{SKU: "aud-cold"}); err != nil || b.Buyers == nil || len(b.Buyers) != 0 {
		t.Fatalf("buyers of an unwarmed sku: %+v %v", b, err)
	}
}

func holdings(hs []ledger.Holding) map[string]int64 {
	m := map[string]int64{}
	for _, h := range hs {
		m[h.UserID] = h.Qty
	}
	return m
}

func sameEntry(x, y ledger.AuditEntry) bool {
	return x.EventID == y.EventID && x.Seq == y.Seq && x.OccurredAt.Equal(y.OccurredAt) && x.RecordedAt.Equal(y.RecordedAt)
}
