package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger"
)

func TestCloseEndpoint(t *testing.T) {
	t.Parallel()
	s := serveStack(t, stacktest.New(t))
	s.mustCreateWarm(t, "close-1", `{"stock":5,"per_user_limit":1}`)
	if r := s.do(t, http.MethodPost, "/v1/skus/close-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`); r.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
	receipt := s.do(t, http.MethodPost, "/v1/skus/close-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`).body

	before := s.footprint(t, "close-1")
	for _, secret := range []string{secretGateway, secretAuditor, secretApprover} {
		expectError(t, s.do(t, http.MethodPost, "/v1/skus/close-1/close", secret, ""), http.StatusForbidden, codeForbidden)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/close-1/close", "", ""), http.StatusUnauthorized, codeUnauthorized)
	if after := s.footprint(t, "close-1"); after != before {
		t.Fatalf("refused close changed Redis: %+v -> %+v", before, after)
	}

	var first wire.CloseJSON
	r := s.do(t, http.MethodPost, "/v1/skus/close-1/close", secretOperator, "")
	if r.status != http.StatusOK || json.Unmarshal(r.body, &first) != nil || first.Status != "closed" || first.AlreadyClosed ||
		time.Since(first.ClosedAt) > time.Minute {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	var again wire.CloseJSON
	r = s.do(t, http.MethodPost, "/v1/skus/close-1/close", secretOperator, "")
	if r.status != http.StatusOK || json.Unmarshal(r.body, &again) != nil || !again.AlreadyClosed || !again.ClosedAt.Equal(first.ClosedAt) {
		t.Fatalf("close again: %d %s, want already closed at %v", r.status, r.body, first.ClosedAt)
	}

	expectError(t, s.do(t, http.MethodPost, "/v1/skus/close-1/deduct", secretGateway, `{"user_id":"u2","qty":1,"request_id":"r2"}`),
		http.StatusConflict, "closed")
	if r := s.do(t, http.MethodPost, "/v1/skus/close-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`); r.status != http.StatusOK || string(r.body) != string(receipt) {
		t.Fatalf("retry after close: %d %s, want the original receipt %s", r.status, r.body, receipt)
	}
	var view wire.SKUViewJSON
	if r := s.do(t, http.MethodGet, "/v1/skus/close-1", secretAuditor, ""); json.Unmarshal(r.body, &view) != nil || view.State != "closed" {
		t.Fatalf("sku after close: %s", r.body)
	}

	expectError(t, s.do(t, http.MethodPost, "/v1/skus/nope/close", secretOperator, ""), http.StatusNotFound, "not_found")
	if r := s.do(t, http.MethodPut, "/v1/skus/cold-1", secretOperator, `{"stock":5,"per_user_limit":1}`); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/cold-1/close", secretOperator, ""), http.StatusConflict, "not_warmed", "restore-redis")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/bad%7B/close", secretOperator, ""), http.StatusBadRequest, "invalid_request", "sku")
	expectError(t, s.do(t, http.MethodGet, "/v1/skus/close-1/close", secretOperator, ""), http.StatusMethodNotAllowed, codeMethodNotAllowed)
}

func TestCloseRouteMapsErrorsWithoutLeakingThem(t *testing.T) {
	h := newStubHandler(t, Config{Closer: closerFunc(func(context.Context, string) error { return errors.New("dial tcp 10.0.0.7:6379: refused") })})
	expectError(t, serve(h, http.MethodPost, "/v1/skus/x/close", secretOperator, ""), http.StatusInternalServerError, "internal", detailInternal)
}

type closerFunc func(ctx context.Context, sku string) error

func (f closerFunc) CloseSKU(ctx context.Context, sku string) (ledger.CloseResult, error) {
	return ledger.CloseResult{}, f(ctx, sku)
}

func (f closerFunc) RetireSKU(ctx context.Context, sku string) (ledger.RetireResult, error) {
	return ledger.RetireResult{}, f(ctx, sku)
}

// TestRetireEndpoint: retire refuses an open or unarchived SKU, then
// retires it; afterwards a purchase is 409 closed, a retry gets its
// original receipt, and a release is 409 retired naming restore-redis.
func TestRetireEndpoint(t *testing.T) {
	t.Parallel()
	ls := stacktest.New(t)
	s := serveStack(t, ls)
	s.mustCreateWarm(t, "retire-h", `{"stock":5,"per_user_limit":1}`)
	r := s.do(t, http.MethodPost, "/v1/skus/retire-h/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`)
	if r.status != http.StatusOK {
		t.Fatalf("deduct: %d %s", r.status, r.body)
	}
	var receipt map[string]any
	if err := json.Unmarshal(r.body, &receipt); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{secretGateway, secretAuditor, secretApprover} {
		expectError(t, s.do(t, http.MethodPost, "/v1/skus/retire-h/retire", secret, ""), http.StatusForbidden, codeForbidden)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/retire-h/retire", secretOperator, ""), http.StatusConflict, "conflict", "sku close")
	if r := s.do(t, http.MethodPost, "/v1/skus/retire-h/close", secretOperator, ""); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/retire-h/retire", secretOperator, ""), http.StatusConflict, "conflict", "archive-buyers")
	ls.ProjectStreams(t)
	if _, err := ls.Archiver(t).ArchiveBuyers(context.Background(), "retire-h"); err != nil {
		t.Fatal(err)
	}
	var res wire.RetireJSON
	r = s.do(t, http.MethodPost, "/v1/skus/retire-h/retire", secretOperator, "")
	if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil || res.Status != "retired" || res.Seq != 3 || res.AlreadyRetired { // stocked, deducted, closed
		t.Fatalf("retire: %d %s", r.status, r.body)
	}
	r = s.do(t, http.MethodPost, "/v1/skus/retire-h/retire", secretOperator, "")
	if r.status != http.StatusOK || json.Unmarshal(r.body, &res) != nil || !res.AlreadyRetired {
		t.Fatalf("retire again: %d %s", r.status, r.body)
	}

	expectError(t, s.do(t, http.MethodPost, "/v1/skus/retire-h/deduct", secretGateway, `{"user_id":"u2","qty":1,"request_id":"r2"}`),
		http.StatusConflict, "closed")
	var retry map[string]any
	r = s.do(t, http.MethodPost, "/v1/skus/retire-h/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &retry) != nil || retry["seq"] != receipt["seq"] ||
		retry["remaining"] != receipt["remaining"] || retry["event_id"] != receipt["event_id"] {
		t.Fatalf("retry after retirement: %d %s, want the receipt %s", r.status, r.body, receipt)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/retire-h/release", secretGateway, `{"user_id":"u1","request_id":"r1"}`),
		http.StatusConflict, "retired", "restore-redis --sku retire-h")
	var view wire.SKUViewJSON
	if r := s.do(t, http.MethodGet, "/v1/skus/retire-h", secretAuditor, ""); json.Unmarshal(r.body, &view) != nil || view.State != "retired" {
		t.Fatalf("sku after retirement: %s", r.body)
	}
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/nope/retire", secretOperator, ""), http.StatusNotFound, "not_found")
	expectError(t, s.do(t, http.MethodPost, "/v1/skus/bad%7B/retire", secretOperator, ""), http.StatusBadRequest, "invalid_request", "sku")
}
