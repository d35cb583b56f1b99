package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestDuplicateAndCaseKeysAreRefusedAndWriteNothing: {"qty":1,"qty":5} no
// longer buys 5, and {"QTY":3} is not read as qty.
func TestDuplicateAndCaseKeysAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "dup-keys"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":5}`)
	before := s.footprint(t, sku)
	deduct := "/v1/skus/" + sku + "/deduct"
	for _, c := range []struct{ method, path, secret, body, detail string }{
		{http.MethodPost, deduct, secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1","qty":5}`, `qty: is given more than once`},
		{http.MethodPost, deduct, secretGateway, `{"user_id":"u1","QTY":3,"request_id":"r1"}`, `unknown field "QTY"`},
		{http.MethodPost, "/v1/skus/" + sku + "/release", secretGateway, `{"user_id":"u1","request_id":"r1","request_id":"r2"}`, "request_id: is given more than once"},
		{http.MethodPut, "/v1/skus/dup-keys-2", secretOperator, `{"stock":1,"stock":100}`, "stock: is given more than once"},
		{http.MethodPut, "/v1/skus/dup-keys-2", secretOperator, `{"Stock":100}`, `unknown field "Stock"`},
		{http.MethodPost, "/v1/adjustments", secretOperator, `{"sku":"dup-keys","delta":1,"delta":100,"reason":"x"}`, "delta: is given more than once"},
		{http.MethodPost, "/v1/reconcile", secretOperator, `{"SKU":"dup-keys"}`, `unknown field "SKU"`},
	} {
		expectError(t, s.do(t, c.method, c.path, c.secret, c.body), http.StatusBadRequest, "invalid_request", c.detail)
	}
	if after := s.footprint(t, sku); after != before {
		t.Fatalf("refused bodies changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
	if r := s.do(t, http.MethodGet, "/v1/skus/dup-keys-2", secretAuditor, ""); r.status != http.StatusNotFound {
		t.Fatalf("refused create defined the SKU: %d %s", r.status, r.body)
	}
}

// TestNonCanonicalUserIDsAreRefused: "u9 " and a decomposed accent are
// refused with a detail saying why, not bought as other buyers.
func TestNonCanonicalUserIDsAreRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "canonical-users"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":1}`)
	deduct := "/v1/skus/" + sku + "/deduct"
	if r := s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"u9","qty":1,"request_id":"r1"}`); r.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
	before := s.footprint(t, sku)
	expectError(t, s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"u9 ","qty":1,"request_id":"r2"}`),
		http.StatusBadRequest, "invalid_request", "user_id:", "whitespace")
	expectError(t, s.do(t, http.MethodPost, deduct, secretGateway, `{"user_id":"jose\u0301","qty":1,"request_id":"r3"}`),
		http.StatusBadRequest, "invalid_request", "user_id:", "NFC")
	if after := s.footprint(t, sku); after != before {
		t.Fatalf("refused user ids changed Redis:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestReplayHeaders: a retried purchase keeps its byte-identical body and
// says in headers that it is a replay, and whether the units went back.
func TestReplayHeaders(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	const sku = "replay-headers"
	s.mustCreateWarm(t, sku, `{"stock":10,"per_user_limit":1}`)
	deduct := "/v1/skus/" + sku + "/deduct"
	const body = `{"user_id":"u1","qty":1,"request_id":"case-1"}`
	first := s.do(t, http.MethodPost, deduct, secretGateway, body)
	if first.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", first.status, first.body)
	}
	check := func(r response, replayed, released string) {
		t.Helper()
		if r.status != http.StatusOK || string(r.body) != string(first.body) {
			t.Fatalf("replay: %d %s, want 200 %s", r.status, r.body, first.body)
		}
		if got := r.header.Get("Idempotent-Replayed"); got != replayed {
			t.Fatalf("Idempotent-Replayed = %q, want %q", got, replayed)
		}
		if got := r.header.Get("Invledger-Released"); got != released {
			t.Fatalf("Invledger-Released = %q, want %q", got, released)
		}
	}
	check(first, "", "")
	check(s.do(t, http.MethodPost, deduct, secretGateway, body), "true", "")
	if r := s.do(t, http.MethodPost, "/v1/skus/"+sku+"/release", secretGateway, `{"user_id":"u1","request_id":"case-1"}`); r.status != http.StatusOK {
		t.Fatalf("release: %d %s", r.status, r.body)
	}
	check(s.do(t, http.MethodPost, deduct, secretGateway, body), "true", "true")
}

// newReconcileStack serves the API with the real reconciler and run list.
func newReconcileStack(t *testing.T) *stack {
	t.Helper()
	ls := stacktest.New(t)
	h, err := NewHandler(stubbed(t, Config{Ledger: ls.Service, Auditor: ls.App.Auditor,
		Reconciler: ls.App.Reconciler, Runs: approot.Of(ls.App).Adapters.Reconciliations}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &stack{srv: srv, client: srv.Client(), rdb: ls.RedisClient, pool: ls.Pool, keys: approot.Of(ls.App).Keys, svc: ls.Service}
}

// TestReconcileUndefinedSKUIsNotFound: reconciling a SKU never defined is
// 404, and records no run.
func TestReconcileUndefinedSKUIsNotFound(t *testing.T) {
	t.Parallel()
	s := newReconcileStack(t)
	expectError(t, s.do(t, http.MethodPost, "/v1/reconcile", secretOperator, `{"sku":"never-defined"}`), http.StatusNotFound, "not_found")
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM reconciliation_runs`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("runs recorded: %d %v", n, err)
	}
	if r := s.do(t, http.MethodPut, "/v1/skus/defined", secretOperator, `{"stock":1}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := s.do(t, http.MethodPost, "/v1/reconcile", secretOperator, `{"sku":"defined"}`); r.status != http.StatusOK {
		t.Fatalf("reconcile a defined SKU: %d %s", r.status, r.body)
	}
}

// TestListQueriesAreStrict: the list endpoints refuse unknown, repeated and
// malformed parameters, naming them; cursors outside PostgreSQL's range are
// refused; year 1 is an instant like year 0.
func TestListQueriesAreStrict(t *testing.T) {
	t.Parallel()
	s := newReconcileStack(t)
	if r := s.do(t, http.MethodPut, "/v1/skus/q-sku", secretOperator, `{"stock":1}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ path, detail string }{
		{"/v1/reconciliations?limt=5", "limt: is not a parameter"},
		{"/v1/reconciliations?limit=5&limit=6", "limit: is given more than once"},
		{"/v1/reconciliations?limit=x", "limit:"},
		{"/v1/reconciliations?limit=", "limit: is empty"},
		{"/v1/reconciliations?%zz", "query:"},
		{"/v1/reconciliations?after=-1", "after:"},
		{"/v1/reconciliations?after=99999999999999999999", "after:"},
		{"/v1/adjustments?statuss=pending", "statuss: is not a parameter"},
		{"/v1/adjustments?sku=a&sku=b", "sku: is given more than once"},
		{"/v1/users/u1/purchases?after=-9223372036854775808_" + uuid.NewString(), "after:"},
	} {
		expectError(t, s.do(t, http.MethodGet, c.path, secretAuditor, ""), http.StatusBadRequest, "invalid_request", c.detail)
	}
	for _, at := range []string{"0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z"} {
		r := s.do(t, http.MethodGet, "/v1/skus/q-sku/balance?at="+at, secretAuditor, "")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"stock":0`) {
			t.Fatalf("balance at %s: %d %s, want 200 with stock 0", at, r.status, r.body)
		}
	}
}

// TestReconciliationsArePaged: ?limit=&after= walks every run, newest
// first, ending with next_after null.
func TestReconciliationsArePaged(t *testing.T) {
	t.Parallel()
	s := newReconcileStack(t)
	for range 3 {
		if r := s.do(t, http.MethodPost, "/v1/reconcile", secretOperator, ""); r.status != http.StatusOK {
			t.Fatalf("reconcile: %d %s", r.status, r.body)
		}
	}
	var ids []int64
	path := "/v1/reconciliations?limit=2"
	for pages := 0; ; pages++ {
		var page struct {
			Runs      []struct{ ID int64 } `json:"runs"`
			NextAfter *int64               `json:"next_after"`
		}
		r := s.do(t, http.MethodGet, path, secretAuditor, "")
		if err := json.Unmarshal(r.body, &page); r.status != http.StatusOK || err != nil || pages > 2 {
			t.Fatalf("%s: %d %s %v", path, r.status, r.body, err)
		}
		for _, run := range page.Runs {
			ids = append(ids, run.ID)
		}
		if page.NextAfter == nil {
			break
		}
		path = fmt.Sprintf("/v1/reconciliations?limit=2&after=%d", *page.NextAfter)
	}
	if fmt.Sprint(ids) != "[3 2 1]" {
		t.Fatalf("paged run ids %v, want [3 2 1]", ids)
	}
}
