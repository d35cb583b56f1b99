package main

import (
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

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/adapters/localstack"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/jackc/pgx/v5"
)

// startServe runs serve with every component on a private stack and
// returns its API URL, its database URL, and a stop that shuts it down as
// SIGTERM would and returns serve's result.
func startServe(t *testing.T, tokens string) (api, databaseURL string, stop func() error) {
	t.Helper()
	ctx := context.Background()
	stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: stackDir(t), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)
	cfg := Config{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL, LogLevel: "error"}
	cfg.setDefaults()
	if err := app.Migrate(ctx, cfg.DatabaseURL, quietLogger()); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ss := serveSettings{Durability: app.DurabilityStrict, Config: server.Config{Listen: "127.0.0.1:0", Tokens: tokens,
		Subscribers: 2, BatchSize: 100, OnListening: func(addr string) { ready <- addr }}}
	serveCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serve(serveCtx, cfg, ss) }()
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
		return "http://" + addr, cfg.DatabaseURL, stop
	case err := <-done:
		t.Fatalf("serve ended early: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening")
	}
	return "", "", nil
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

func TestAdjustCommands(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	s.SKU(t, "cli-adj", 10, 1)

	out, stderr, err := runCLI(t, s, "adjust", "request", "--sku", "cli-adj", "--delta", "3", "--reason", "recount", "--as", "alice")
	if err != nil {
		t.Fatalf("adjust request: %v %s", err, stderr)
	}
	var adj httpapi.AdjustmentJSON
	if err := json.Unmarshal([]byte(out), &adj); err != nil || adj.Status != string(domain.AdjustmentPending) || adj.RequestedBy != "alice" {
		t.Fatalf("request printed %q (%v)", out, err)
	}
	id := strconv.FormatInt(adj.ID, 10)
	if _, _, err := runCLI(t, s, "adjust", "approve", id, "--as", "alice"); !errors.Is(err, domain.ErrSelfApproval) || exitCode(err) != 2 {
		t.Fatalf("self-approval: %v (exit %d), want ErrSelfApproval and exit 2", err, exitCode(err))
	}
	if _, _, err := runCLI(t, s, "adjust", "approve", "x", "--as", "bob"); err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("bad id: %v, want an error naming id", err)
	}
	out, stderr, err = runCLI(t, s, "adjust", "approve", id, "--as", "bob")
	if err != nil || json.Unmarshal([]byte(out), &adj) != nil || adj.Status != string(domain.AdjustmentApplied) {
		t.Fatalf("approve: %v %s\n%s", err, stderr, out)
	}
	if st, err := s.Service.State(context.Background(), "cli-adj"); err != nil || *st.RedisStock != 13 {
		t.Fatalf("stock after approval: %v %v, want 13", st.RedisStock, err)
	}
	out, _, err = runCLI(t, s, "adjust", "list", "--status", "applied")
	if err != nil || !strings.Contains(out, "cli-adj") || !strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Fatalf("list: %v\n%s", err, out)
	}
}
