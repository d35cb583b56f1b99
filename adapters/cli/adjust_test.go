package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// startServe runs serve with every component on a private stack and
// returns its API URL, its database URL, and a stop that shuts it down as
// SIGTERM would and returns serve's result.
func startServe(t *testing.T, tokens string) (api, databaseURL string, stop func() error) {
	t.Helper()
	api, stack, stop := startServeStack(t, tokens)
	return api, stack.DatabaseURL, stop
}

// startServeStack is startServe that also returns the private stack, for
// tests that run the CLI against it too; opts change serve's settings (the
// README test's seal key, dev's).
func startServeStack(t *testing.T, tokens string, opts ...func(*Config)) (api string, stack *localstack.Stack, stop func() error) {
	t.Helper()
	ctx := context.Background()
	stack = localstacktest.Stack(t)
	cfg := Config{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL, LogLevel: "error"}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.setDefaults()
	if err := app.Migrate(ctx, cfg.DatabaseURL, quietLogger()); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ss := ServeSettings{Durability: app.DurabilityStrict, Config: server.Config{Listen: "127.0.0.1:0", Tokens: tokens,
		Subscribers: 2, CommitSize: 100, DataDir: t.TempDir(), OnListening: func(addr string) { ready <- addr }}}
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Serve(serveCtx, cfg, ss) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(30 * time.Second):
				result = errors.New("serve did not shut down within 30s")
			}
		})
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case addr := <-ready:
		return "http://" + addr, stack, stop
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening")
	}
	return "", nil, nil
}

type apiClient struct {
	t   *testing.T
	api string
}

func (c apiClient) call(method, path, token, body string) (int, map[string]any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.api+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func TestAdjustmentFlowOverHTTP(t *testing.T) {
	t.Parallel()
	const (
		olga   = "olga-operator-secret"
		adam   = "adam-approver-secret"
		samOp  = "sam-operator-secret0"
		samApp = "sam-approver-secret0"
		audit  = "audrey-auditor-secret"
	)
	api, dbURL, _ := startServe(t, "olga:operator:"+olga+",adam:approver:"+adam+",sam:operator:"+samOp+",sam:approver:"+samApp+",audrey:auditor:"+audit)
	c := apiClient{t: t, api: api}
	must := func(code int, m map[string]any) func(want int) map[string]any {
		return func(want int) map[string]any {
			t.Helper()
			if code != want {
				t.Fatalf("status %d, want %d: %v", code, want, m)
			}
			return m
		}
	}
	must(c.call("PUT", "/v1/skus/adj-1", olga, `{"stock":10,"per_user_limit":1}`))(201)
	must(c.call("POST", "/v1/skus/adj-1/warm", olga, ""))(200)
	stock := func() float64 {
		_, m := c.call("GET", "/v1/skus/adj-1", audit, "")
		return m["redis_stock"].(float64)
	}

	req := must(c.call("POST", "/v1/adjustments", olga, `{"sku":"adj-1","delta":5,"reason":"found a pallet"}`))(201)
	id := int(req["id"].(float64))
	if req["status"] != "pending" || stock() != 10 {
		t.Fatalf("a request must change nothing: %v, stock %v", req, stock())
	}

	own := must(c.call("POST", "/v1/adjustments", samOp, `{"sku":"adj-1","delta":1,"reason":"mine"}`))(201)
	ownID := int(own["id"].(float64))
	if code, m := c.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", ownID), samApp, ""); code != 403 || m["error"] != "self_approval" {
		t.Fatalf("self-approval: %d %v, want 403 self_approval", code, m)
	}
	if code, _ := c.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), olga, ""); code != 403 {
		t.Fatalf("approve with an operator token: %d, want 403", code)
	}

	applied := must(c.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), adam, ""))(200)
	if applied["status"] != "applied" || applied["reconciliation_run_id"] == nil || stock() != 15 {
		t.Fatalf("approval: %v, stock %v; want applied, reconciled, stock 15", applied, stock())
	}
	again := must(c.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), adam, ""))(200)
	if again["seq"] != applied["seq"] || again["event_id"] != applied["event_id"] || stock() != 15 {
		t.Fatalf("second approval applied again: %v, stock %v", again, stock())
	}

	rejected := must(c.call("POST", fmt.Sprintf("/v1/adjustments/%d/reject", ownID), adam, ""))(200)
	if rejected["status"] != "rejected" || stock() != 15 {
		t.Fatalf("reject: %v", rejected)
	}

	neg := must(c.call("POST", "/v1/adjustments", olga, `{"sku":"adj-1","delta":-100,"reason":"shrinkage"}`))(201)
	negID := int(neg["id"].(float64))
	if code, m := c.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", negID), adam, ""); code != 409 || m["error"] != "insufficient_stock" {
		t.Fatalf("adjustment below zero: %d %v, want 409 insufficient_stock", code, m)
	}
	list := must(c.call("GET", "/v1/adjustments?status=failed", audit, ""))(200)
	if items := list["adjustments"].([]any); len(items) != 1 || int(items[0].(map[string]any)["id"].(float64)) != negID || stock() != 15 {
		t.Fatalf("failed adjustments: %v, stock %v", items, stock())
	}

	// The ledger moves by exactly delta, and the adjusted row names both people.
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(20 * time.Second)
	var sum int64
	var actor string
	for {
		err := conn.QueryRow(context.Background(), `SELECT (SELECT sum(delta) FROM ledger_entries WHERE sku = 'adj-1'),
			COALESCE((SELECT actor FROM ledger_entries WHERE sku = 'adj-1' AND type = 'adjusted'), '')`).Scan(&sum, &actor)
		if err == nil && sum == 15 && actor != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger: sum %d actor %q err %v; want 15 and an adjusted row", sum, actor, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(actor, "requested_by=olga") || !strings.Contains(actor, "approved_by=adam") {
		t.Fatalf("adjusted row actor %q does not name both people", actor)
	}
}

// runCLIRaw runs the CLI with exactly args (no stack flags added).
func runCLIRaw(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	cmd := NewRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// adjustStack is a running serve with an operator "alice", approvers "bob"
// and "Alice" (her own name in another case, held by the approver role),
// and an auditor.
type adjustStack struct {
	apiClient
	dbURL string
}

const (
	aliceOp    = "alice-operator-secret"
	bobApp     = "bob-approver-secret0"
	carolApp   = "carol-approver-secret"
	auditorTok = "audrey-auditor-secret"
)

func newAdjustStack(t *testing.T) adjustStack {
	t.Helper()
	api, dbURL, _ := startServe(t, "alice:operator:"+aliceOp+",bob:approver:"+bobApp+",carol:approver:"+carolApp+",audrey:auditor:"+auditorTok)
	return adjustStack{apiClient: apiClient{t: t, api: api}, dbURL: dbURL}
}

func (s adjustStack) must(want int, method, path, token, body string) map[string]any {
	s.t.Helper()
	code, m := s.call(method, path, token, body)
	if code != want {
		s.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, m)
	}
	return m
}

func (s adjustStack) sku(name string, stock int) {
	s.t.Helper()
	s.must(201, "PUT", "/v1/skus/"+name, aliceOp, fmt.Sprintf(`{"stock":%d,"per_user_limit":1}`, stock))
	s.must(200, "POST", "/v1/skus/"+name+"/warm", aliceOp, "")
}

func (s adjustStack) request(sku string, delta int) int {
	s.t.Helper()
	m := s.must(201, "POST", "/v1/adjustments", aliceOp, fmt.Sprintf(`{"sku":%q,"delta":%d,"reason":"recount"}`, sku, delta))
	return int(m["id"].(float64))
}

// adjustedRows counts the SKU's adjusted rows in the ledger once the
// projector has caught up with Redis's seq.
func (s adjustStack) adjustedRows(sku string) int {
	s.t.Helper()
	_, m := s.call("GET", "/v1/skus/"+sku, auditorTok, "")
	conn, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	want := int64(m["redis_seq"].(float64))
	deadline := time.Now().Add(20 * time.Second)
	for {
		var seq int64
		var n int
		err := conn.QueryRow(context.Background(), `SELECT COALESCE(max(seq), 0), count(*) FILTER (WHERE type = 'adjusted')
			FROM ledger_entries WHERE sku = $1`, sku).Scan(&seq, &n)
		if err == nil && seq >= want {
			return n
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("ledger of %s did not reach seq %d: %d %v", sku, want, seq, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConcurrentApprovalsAnswerTheStoredOutcome: 20 approvals of one
// adjustment at once apply it once, and every approver gets 200 with the
// applied adjustment, never a 404.
func TestConcurrentApprovalsAnswerTheStoredOutcome(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	s.sku("race-1", 10)
	for round := range 3 {
		id := s.request("race-1", 1)
		var wg sync.WaitGroup
		codes := make([]int, 20)
		bodies := make([]map[string]any, 20)
		for i := range 20 {
			tok := bobApp
			if i%2 == 1 {
				tok = carolApp
			}
			wg.Go(func() { codes[i], bodies[i] = s.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), tok, "") })
		}
		wg.Wait()
		for i := range 20 {
			if codes[i] != 200 || bodies[i]["status"] != "applied" || bodies[i]["seq"] != bodies[0]["seq"] || bodies[i]["event_id"] != bodies[0]["event_id"] {
				t.Fatalf("round %d approver %d: %d %v, want 200 applied like %v", round, i, codes[i], bodies[i], bodies[0])
			}
		}
	}
	if n := s.adjustedRows("race-1"); n != 3 {
		t.Fatalf("adjusted rows: %d, want 3 (one per adjustment)", n)
	}
	_, m := s.call("GET", "/v1/skus/race-1", auditorTok, "")
	if m["redis_stock"].(float64) != 13 {
		t.Fatalf("stock %v, want 13", m["redis_stock"])
	}
}

// TestSelfApprovalIsCaseFolded: an approver named "bob" may not approve
// or reject what "BOB" requested. The API refuses token sets whose names
// differ only by case (TestParseTokensRefusesNamesDifferingByCase), so the
// request is one written before that, as the old CLI's --as allowed.
func TestSelfApprovalIsCaseFolded(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	s.must(201, "PUT", "/v1/skus/case-1", aliceOp, `{"stock":5,"per_user_limit":1}`)
	conn, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id int
	if err := conn.QueryRow(context.Background(), `INSERT INTO adjustments (sku, delta, reason, requested_by)
		VALUES ('case-1', 2, 'recount', 'BOB') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"approve", "reject"} {
		if code, m := s.call("POST", fmt.Sprintf("/v1/adjustments/%d/%s", id, verb), bobApp, ""); code != 403 || m["error"] != "self_approval" {
			t.Fatalf("%s by bob of BOB's request: %d %v, want 403 self_approval", verb, code, m)
		}
	}
	if m := s.must(200, "GET", "/v1/adjustments", auditorTok, ""); m["adjustments"].([]any)[0].(map[string]any)["status"] != "pending" {
		t.Fatalf("after refused self-approvals: %v, want still pending", m)
	}
}

// TestRejectApprovedButUnapplied: an approval of a SKU that is not warmed
// leaves the adjustment approved; an approver can then reject it, and it is
// never applied after.
func TestRejectApprovedButUnapplied(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	s.must(201, "PUT", "/v1/skus/cold-1", aliceOp, `{"stock":5,"per_user_limit":1}`)
	id := s.request("cold-1", 3)
	if code, m := s.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), bobApp, ""); code != 409 || m["error"] != "not_warmed" {
		t.Fatalf("approve on a cold SKU: %d %v, want 409 not_warmed", code, m)
	}
	rej := s.must(200, "POST", fmt.Sprintf("/v1/adjustments/%d/reject", id), carolApp, "")
	if rej["status"] != "rejected" || rej["decided_by"] != "carol" {
		t.Fatalf("reject approved: %v, want rejected by carol", rej)
	}
	s.must(200, "POST", "/v1/skus/cold-1/warm", aliceOp, "")
	if code, m := s.call("POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), bobApp, ""); code != 409 || m["error"] != "conflict" {
		t.Fatalf("approve after reject: %d %v, want 409 conflict", code, m)
	}
	if _, m := s.call("GET", "/v1/skus/cold-1", auditorTok, ""); m["redis_stock"].(float64) != 5 {
		t.Fatalf("stock %v, want 5: a rejected adjustment applied", m["redis_stock"])
	}
	// An applied one cannot be rejected.
	id = s.request("cold-1", 1)
	s.must(200, "POST", fmt.Sprintf("/v1/adjustments/%d/approve", id), bobApp, "")
	if code, m := s.call("POST", fmt.Sprintf("/v1/adjustments/%d/reject", id), carolApp, ""); code != 409 || m["error"] != "conflict" {
		t.Fatalf("reject applied: %d %v, want 409 conflict", code, m)
	}
}

// TestAdjustmentsPageAndStrictQuery: /v1/adjustments pages with
// ?limit=&after= and next_after, and refuses unknown, duplicate and
// malformed parameters naming them.
func TestAdjustmentsPageAndStrictQuery(t *testing.T) {
	t.Parallel()
	s := newAdjustStack(t)
	s.must(201, "PUT", "/v1/skus/page-1", aliceOp, `{"stock":5,"per_user_limit":1}`)
	var ids []int
	for range 5 {
		ids = append(ids, s.request("page-1", 1))
	}
	var seen []int
	path := "/v1/adjustments?limit=2"
	for pages := 0; ; pages++ {
		m := s.must(200, "GET", path, auditorTok, "")
		for _, a := range m["adjustments"].([]any) {
			seen = append(seen, int(a.(map[string]any)["id"].(float64)))
		}
		if m["next_after"] == nil {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		path = fmt.Sprintf("/v1/adjustments?limit=2&after=%d", int(m["next_after"].(float64)))
	}
	if fmt.Sprint(seen) != fmt.Sprint([]int{ids[4], ids[3], ids[2], ids[1], ids[0]}) {
		t.Fatalf("pages gave %v, want %v newest first", seen, ids)
	}
	for q, field := range map[string]string{"limt=5": "limt", "status=pending&status=failed": "status", "limit=x": "limit",
		"after=-1": "after", "limit=0": "limit", "status=bogus": "status"} {
		code, m := s.call("GET", "/v1/adjustments?"+q, auditorTok, "")
		if code != 400 || m["field"] != field {
			t.Errorf("?%s: %d %v, want 400 naming %s", q, code, m, field)
		}
	}
}

// TestAdjustCommands: the CLI's adjust commands go through the API with a
// token; without --api and --token they refuse and change nothing, and
// there is no --as to claim another name. Not parallel: it sets the
// environment.
func TestAdjustCommands(t *testing.T) {
	s := newAdjustStack(t)
	s.sku("cli-adj", 10)
	api := []string{"--api", s.api}

	for _, args := range [][]string{
		{"adjust", "request", "--sku", "cli-adj", "--delta", "3", "--reason", "recount"},
		{"adjust", "request", "--sku", "cli-adj", "--delta", "3", "--reason", "recount", "--api", s.api},
		{"adjust", "list"},
	} {
		if _, _, err := runCLIRaw(args...); !errors.Is(err, apiclient.ErrNotConfigured) || !strings.Contains(err.Error(), "INVLEDGER_API_TOKEN") ||
			exitCode(err) != exitAuth {
			t.Fatalf("%v without the API: %v (exit %d), want a refusal naming INVLEDGER_API_TOKEN, exit %d", args, err, exitCode(err), exitAuth)
		}
	}
	if _, _, err := runCLIRaw("adjust", "approve", "1", "--as", "mallory"); exitCode(err) != exitUsage {
		t.Fatalf("--as: %v (exit %d), want a usage error", err, exitCode(err))
	}
	if m := s.must(200, "GET", "/v1/adjustments", auditorTok, ""); len(m["adjustments"].([]any)) != 0 {
		t.Fatalf("refused commands wrote: %v", m)
	}

	out, stderr, err := runCLIRaw(append([]string{"adjust", "request", "--sku", "cli-adj", "--delta", "3", "--reason", "recount", "--token", aliceOp}, api...)...)
	if err != nil {
		t.Fatalf("adjust request: %v %s", err, stderr)
	}
	var adj wire.AdjustmentJSON
	if err := json.Unmarshal([]byte(out), &adj); err != nil || adj.Status != string(domain.AdjustmentPending) || adj.RequestedBy != "alice" {
		t.Fatalf("request printed %q (%v)", out, err)
	}
	// The API's "field" member reads as a local field error: "delta: must be ...".
	if _, _, err := runCLIRaw(append([]string{"adjust", "request", "--sku", "cli-adj", "--delta", "0", "--reason", "x", "--token", aliceOp}, api...)...); err == nil ||
		!strings.HasPrefix(err.Error(), "delta: must be a non-zero integer") || exitCode(err) != exitBadInput {
		t.Fatalf("request with delta 0: %v (exit %d), want the field error naming delta", err, exitCode(err))
	}
	id := strconv.FormatInt(adj.ID, 10)
	if _, _, err := runCLIRaw(append([]string{"adjust", "approve", id, "--token", aliceOp}, api...)...); exitCode(err) != exitAuth || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("approve with an operator token: %v (exit %d), want forbidden, exit %d", err, exitCode(err), exitAuth)
	}
	if _, _, err := runCLIRaw(append([]string{"adjust", "list", "--token", "no-such-secret"}, api...)...); exitCode(err) != exitAuth ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("list with an unknown token: %v (exit %d), want 401, exit %d", err, exitCode(err), exitAuth)
	}
	if _, _, err := runCLIRaw(append([]string{"adjust", "approve", "x", "--token", bobApp}, api...)...); err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("bad id: %v, want an error naming id", err)
	}
	t.Setenv("INVLEDGER_API_URL", s.api)
	t.Setenv("INVLEDGER_API_TOKEN", bobApp)
	out, stderr, err = runCLIRaw("adjust", "approve", id)
	if err != nil || json.Unmarshal([]byte(out), &adj) != nil || adj.Status != string(domain.AdjustmentApplied) || *adj.DecidedBy != "bob" {
		t.Fatalf("approve: %v %s\n%s", err, stderr, out)
	}
	if _, m := s.call("GET", "/v1/skus/cli-adj", auditorTok, ""); m["redis_stock"].(float64) != 13 {
		t.Fatalf("stock after approval: %v, want 13", m["redis_stock"])
	}
	out, _, err = runCLIRaw("adjust", "list", "--status", "applied")
	if err != nil || !strings.Contains(out, "cli-adj") || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// issue 17, F16: --format json prints the API's page, csv a header and rows.
	var page wire.AdjustmentPageJSON
	out, _, err = runCLIRaw("adjust", "list", "--format", "json")
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Adjustments) != 1 || page.Adjustments[0].SKU != "cli-adj" {
		t.Fatalf("list --format json: %v\n%s", err, out)
	}
	out, _, err = runCLIRaw("adjust", "list", "--format", "csv")
	if err != nil || !strings.HasPrefix(out, "id,sku,delta,status,requested_by,decided_by,reason\n") || !strings.Contains(out, ",cli-adj,3,applied,alice,bob,recount") {
		t.Fatalf("list --format csv: %v\n%s", err, out)
	}
}
