package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// newCatalogStack serves the API with the real ledger, SKU list, closer and
// auditor, and returns the stack underneath too.
func newCatalogStack(t *testing.T) (*stack, *stacktest.Stack) {
	t.Helper()
	ls := stacktest.New(t)
	h, err := NewHandler(stubbed(t, Config{Ledger: ls.Service, SKUs: ls.App.Catalog, Closer: ls.Archiver(t), Auditor: ls.App.Auditor}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &stack{srv: srv, client: srv.Client(), rdb: ls.RedisClient, pool: ls.Pool, keys: approot.Of(ls.App).Keys, svc: ls.Service}, ls
}

// getJSON GETs path as the auditor and decodes a 200 answer into v.
func (s *stack) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	r := s.do(t, http.MethodGet, path, secretAuditor, "")
	if err := json.Unmarshal(r.body, v); r.status != http.StatusOK || err != nil {
		t.Fatalf("GET %s: %d %s %v", path, r.status, r.body, err)
	}
}

// TestLedgerWatermarkStopsAtAGap: with seqs 1, 2 and 4 in the ledger,
// ledger_seq says 4 and ledger_watermark 2; once 3 lands both say 4.
func TestLedgerWatermarkStopsAtAGap(t *testing.T) {
	t.Parallel()
	s, ls := newCatalogStack(t)
	if r := s.do(t, http.MethodPut, "/v1/skus/wm", secretOperator, `{"stock":10}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	event := func(seq int64) domain.Event {
		e := domain.Event{ID: uuid.NewString(), SKU: "wm", Seq: seq, Type: domain.EventDeducted, Delta: -1, Qty: 1,
			Balance: 11 - seq, User: fmt.Sprint("u", seq), RequestID: fmt.Sprint("r", seq), OccurredAt: time.Now(), StreamID: fmt.Sprint("1-", seq)}
		if seq == 1 {
			e.Type, e.Delta, e.Qty, e.Balance, e.User, e.RequestID = domain.EventStocked, 10, 10, 10, "", ""
		}
		return e
	}
	var view struct {
		LedgerSeq       *int64 `json:"ledger_seq"`
		LedgerWatermark *int64 `json:"ledger_watermark"`
	}
	check := func(seq, watermark int64) {
		t.Helper()
		s.getJSON(t, "/v1/skus/wm", &view)
		if view.LedgerSeq == nil || view.LedgerWatermark == nil || *view.LedgerSeq != seq || *view.LedgerWatermark != watermark {
			t.Fatalf("ledger_seq %v, ledger_watermark %v; want %d and %d", view.LedgerSeq, view.LedgerWatermark, seq, watermark)
		}
	}
	s.getJSON(t, "/v1/skus/wm", &view)
	if view.LedgerSeq != nil || view.LedgerWatermark != nil {
		t.Fatalf("before any projection: ledger_seq %v, ledger_watermark %v, want null", view.LedgerSeq, view.LedgerWatermark)
	}
	for _, batch := range [][]int64{{4, 1}, {2}} { // out of order, leaving 3 out
		var events []domain.Event
		for _, seq := range batch {
			events = append(events, event(seq))
		}
		if _, err := ls.Projection.AppendBatch(context.Background(), events); err != nil {
			t.Fatal(err)
		}
	}
	check(4, 2)
	check(4, 2) // again, from the remembered watermark
	if _, err := ls.Projection.AppendBatch(context.Background(), []domain.Event{event(3), event(6)}); err != nil {
		t.Fatal(err)
	}
	check(6, 4)
}

type buyersPage struct {
	Buyers []struct {
		UserID string `json:"user_id"`
		Qty    int64  `json:"qty"`
	} `json:"buyers"`
	NextAfter *string `json:"next_after"`
}

// TestBuyersArePaged: ?limit=&after= walks every holder in user order,
// ending with next_after null; a bad cursor or parameter is a 400.
func TestBuyersArePaged(t *testing.T) {
	t.Parallel()
	s, ls := newCatalogStack(t)
	ls.SKU(t, "bp", 10, 1)
	users := []string{"u3", "u1", "U9", "u2", "u5"}
	for _, u := range users {
		if _, err := ls.Service.Deduct(context.Background(), ledger.MustDeductCommand("bp", u, 1, "r-"+u)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ls.Service.Release(context.Background(), ledger.MustReleaseCommand("bp", "u2", "r-u2", "")); err != nil {
		t.Fatal(err)
	}
	ls.ProjectStreams(t)

	var got []string
	path := "/v1/skus/bp/buyers?limit=2"
	for pages := 0; ; pages++ {
		var page buyersPage
		s.getJSON(t, path, &page)
		if pages > 2 || len(page.Buyers) > 2 {
			t.Fatalf("%s: page %d of %d buyers", path, pages, len(page.Buyers))
		}
		for _, b := range page.Buyers {
			got = append(got, fmt.Sprintf("%s:%d", b.UserID, b.Qty))
		}
		if page.NextAfter == nil {
			break
		}
		path = "/v1/skus/bp/buyers?limit=2&after=" + *page.NextAfter
	}
	if strings.Join(got, " ") != "U9:1 u1:1 u3:1 u5:1" {
		t.Fatalf("paged buyers %v, want U9 u1 u3 u5 in byte order, u2 released", got)
	}
	var all buyersPage
	s.getJSON(t, "/v1/skus/bp/buyers", &all)
	if len(all.Buyers) != 4 || all.NextAfter != nil {
		t.Fatalf("default page: %+v", all)
	}
	for _, c := range []struct{ path, detail string }{
		{"/v1/skus/bp/buyers?after=%20u1", "after:"},
		{"/v1/skus/bp/buyers?limit=0", "limit:"},
		{"/v1/skus/bp/buyers?limit=1001", "limit:"},
		{"/v1/skus/bp/buyers?cursor=u1", "cursor: is not a parameter"},
		{"/v1/skus/bp/buyers?after=u1&after=u2", "after: is given more than once"},
	} {
		expectError(t, s.do(t, http.MethodGet, c.path, secretAuditor, ""), http.StatusBadRequest, "invalid_request", c.detail)
	}
}

type skuListItem struct {
	SKU          string `json:"sku"`
	InitialStock int64  `json:"initial_stock"`
	PerUserLimit int64  `json:"per_user_limit"`
	State        string `json:"state"`
	RedisStock   *int64 `json:"redis_stock"`
	RedisSeq     *int64 `json:"redis_seq"`
	LedgerStock  *int64 `json:"ledger_stock"`
	LedgerSeq    *int64 `json:"ledger_seq"`
}

// TestSKUListIsPaged: GET /v1/skus walks every SKU in id order across
// pages, a SKU not warmed has null Redis fields, a closed one says closed,
// and each item agrees with GET /v1/skus/{sku}.
func TestSKUListIsPaged(t *testing.T) {
	t.Parallel()
	s, ls := newCatalogStack(t)
	ls.SKU(t, "l-live", 5, 2)
	ls.SKU(t, "l-closed", 3, 1)
	if _, err := ls.Service.Deduct(context.Background(), ledger.MustDeductCommand("l-live", "u1", 2, "r1")); err != nil {
		t.Fatal(err)
	}
	if r := s.do(t, http.MethodPost, "/v1/skus/l-closed/close", secretOperator, ""); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := s.do(t, http.MethodPut, "/v1/skus/l-cold", secretOperator, `{"stock":7,"per_user_limit":3}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	ls.ProjectStreams(t)

	var items []skuListItem
	path := "/v1/skus?limit=2"
	for pages := 0; ; pages++ {
		var page struct {
			SKUs      []skuListItem `json:"skus"`
			NextAfter *string       `json:"next_after"`
		}
		s.getJSON(t, path, &page)
		if pages > 1 || len(page.SKUs) > 2 {
			t.Fatalf("%s: page %d of %d skus", path, pages, len(page.SKUs))
		}
		items = append(items, page.SKUs...)
		if page.NextAfter == nil {
			break
		}
		path = "/v1/skus?limit=2&after=" + *page.NextAfter
	}
	if len(items) != 3 || items[0].SKU != "l-closed" || items[1].SKU != "l-cold" || items[2].SKU != "l-live" {
		t.Fatalf("listed %+v, want l-closed, l-cold, l-live", items)
	}
	cold := items[1]
	if cold.State != "not_warmed" || cold.RedisStock != nil || cold.RedisSeq != nil || cold.LedgerStock != nil ||
		cold.LedgerSeq != nil || cold.InitialStock != 7 || cold.PerUserLimit != 3 {
		t.Fatalf("a SKU not warmed: %+v", cold)
	}
	if items[0].State != "closed" {
		t.Fatalf("a closed SKU: %+v", items[0])
	}
	for _, it := range items {
		var one skuListItem
		s.getJSON(t, "/v1/skus/"+it.SKU, &one)
		if fmt.Sprint(one.State, deref(one.RedisStock), deref(one.RedisSeq), deref(one.LedgerStock), deref(one.LedgerSeq)) !=
			fmt.Sprint(it.State, deref(it.RedisStock), deref(it.RedisSeq), deref(it.LedgerStock), deref(it.LedgerSeq)) {
			t.Fatalf("list item %+v differs from GET /v1/skus/%s %+v", it, it.SKU, one)
		}
	}
	if live := items[2]; deref(live.RedisStock) != "3" || deref(live.LedgerStock) != "3" || deref(live.RedisSeq) != "2" {
		t.Fatalf("a live SKU: %+v", live)
	}
	var empty struct {
		SKUs      []skuListItem `json:"skus"`
		NextAfter *string       `json:"next_after"`
	}
	s.getJSON(t, "/v1/skus?after=l-live", &empty)
	if empty.SKUs == nil || len(empty.SKUs) != 0 || empty.NextAfter != nil {
		t.Fatalf("past the last SKU: %+v", empty)
	}
	for _, c := range []struct{ path, detail string }{
		{"/v1/skus?after=a/b", "after:"},
		{"/v1/skus?limit=1001", "limit:"},
		{"/v1/skus?sku=x", "sku: is not a parameter"},
	} {
		expectError(t, s.do(t, http.MethodGet, c.path, secretAuditor, ""), http.StatusBadRequest, "invalid_request", c.detail)
	}
	expectError(t, s.do(t, http.MethodGet, "/v1/skus", secretGateway, ""), http.StatusForbidden, "forbidden")
}

func deref(n *int64) string {
	if n == nil {
		return "null"
	}
	return fmt.Sprint(*n)
}
