package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/cli/internal/demo"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(readmeCLIEnv) == "1" { // the invledger of TestREADMERunsAsWritten
		os.Exit(Main(NewRootCmd()))
	}
	localstacktest.Main(m)
}

func TestDemoSellsEverythingAndNeverOversells(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	dc := demo.Config{Dir: localstacktest.ServerDir(t), Stock: 150, Buyers: 1500, Concurrency: 64, RetryShare: 0.2, RepeatShare: 0.2}
	if err := demo.Run(context.Background(), dc, &out, io.Discard); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"sold                   150\n", "oversold               0\n", "errors                 0\n", "ledger equals Redis    yes"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestServeRunsAPIAndProjectorAndStopsGracefully(t *testing.T) {
	t.Parallel()
	const op, gw = "operator-secret-0001", "gateway-secret-00001"
	api, _, stop := startServe(t, "ops:operator:"+op+",shop:gateway:"+gw+",audit:auditor:auditor-secret-0001")
	call := apiClient{t: t, api: api}.call
	if code, _ := call("GET", "/readyz", "", ""); code != 200 {
		t.Fatalf("readyz %d", code)
	}
	if code, _ := call("PUT", "/v1/skus/srv-1", op, `{"stock":10,"per_user_limit":1}`); code != 201 {
		t.Fatalf("create %d", code)
	}
	if code, _ := call("POST", "/v1/skus/srv-1/warm", op, ""); code != 200 {
		t.Fatalf("warm %d", code)
	}
	for i := range 3 {
		if code, m := call("POST", "/v1/skus/srv-1/deduct", gw, fmt.Sprintf(`{"user_id":"u%d","qty":1,"request_id":"r%d"}`, i, i)); code != 200 {
			t.Fatalf("deduct %d %v", code, m)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, m := call("GET", "/v1/skus/srv-1", "auditor-secret-0001", "")
		if m["ledger_stock"] == float64(7) && m["ledger_seq"] == float64(4) && m["redis_stock"] == float64(7) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("projection did not reach the ledger: %v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// serve's sealer links the projected rows into the chain within a pass.
	for {
		_, m := call("GET", "/v1/skus/srv-1/events?limit=10", "auditor-secret-0001", "")
		if events, _ := m["events"].([]any); len(events) == 4 && events[3].(map[string]any)["hash"] != "" &&
			events[3].(map[string]any)["prev_hash"] == events[2].(map[string]any)["hash"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not seal the ledger: %v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, report := call("POST", "/v1/reconcile", op, `{"repair":true}`)
	if code != 200 || report["checked"] != float64(1) || len(report["drifts"].([]any)) != 0 {
		t.Fatalf("reconcile: %d %v", code, report)
	}
	if code, runs := call("GET", "/v1/reconciliations?limit=5", "auditor-secret-0001", ""); code != 200 || len(runs["runs"].([]any)) == 0 {
		t.Fatalf("reconciliations: %d %v", code, runs)
	}
	if code, _ := call("POST", "/v1/reconcile", gw, ""); code != 403 {
		t.Fatalf("reconcile as gateway: %d, want 403", code)
	}
	if code, m := call("POST", "/v1/skus/srv-1/close", op, ""); code != 200 || m["status"] != "closed" {
		t.Fatalf("close: %d %v", code, m)
	}
	if code, m := call("POST", "/v1/skus/srv-1/deduct", gw, `{"user_id":"late","qty":1,"request_id":"late"}`); code != 409 || m["error"] != "closed" {
		t.Fatalf("deduct after close: %d %v", code, m)
	}
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"invledger_projected_events_total", "invledger_projection_batch_events", "go_goroutines",
		"invledger_deduction_duration_seconds", "invledger_inventory_operations_total", "invledger_reconcile_runs_total", "invledger_fenced_skus", "invledger_ledger_seals_total"} {
		if !bytes.Contains(metrics, []byte(name)) {
			t.Fatalf("/metrics lacks %s", name)
		}
	}

	if err := stop(); err != nil {
		t.Fatalf("serve after SIGTERM-equivalent: %v", err)
	}
}

func TestMalformedSettingsNameTheirVariable(t *testing.T) {
	for _, tc := range []struct{ env, value, args, want string }{
		{"INVLEDGER_PARTITIONS", "many", "migrate", "INVLEDGER_PARTITIONS"},
		{"INVLEDGER_BATCH_WAIT", "soon", "serve", "INVLEDGER_BATCH_WAIT"},
		{"INVLEDGER_DATABASE_URL", "", "migrate", "INVLEDGER_DATABASE_URL"},
		{"INVLEDGER_LOG_LEVEL", "loud", "migrate", "INVLEDGER_LOG_LEVEL"},
		{"INVLEDGER_LOG_FORMAT", "xml", "migrate", "INVLEDGER_LOG_FORMAT"},
		{"INVLEDGER_ALERT_WEBHOOK_SECRET", "not base64!", "serve", "INVLEDGER_ALERT_WEBHOOK_SECRET"},
		{"INVLEDGER_DURABILITY", "maybe", "serve", "INVLEDGER_DURABILITY"},
		{"INVLEDGER_WEBHOOK_ALLOW_NETS", "10.0.0.0/33", "serve", "INVLEDGER_WEBHOOK_ALLOW_NETS"},
		{"INVLEDGER_EXPORT_NATS_URL", "http://u:pw@nats:4222", "serve", "INVLEDGER_EXPORT_NATS_URL): \"http://u:***@nats:4222\" is not a URL of scheme nats:// or tls://"},
		{"INVLEDGER_EXPORT_NATS_CREATE_STREAM", "perhaps", "serve", "INVLEDGER_EXPORT_NATS_CREATE_STREAM"},
		{"INVLEDGER_EXPORT_PREFIX", "a..b", "serve", "INVLEDGER_EXPORT_PREFIX"},
		// The cloud metadata address, refused before anything starts.
		{"INVLEDGER_ALERT_WEBHOOK", "http://169.254.169.254/alerts", "serve", "INVLEDGER_ALERT_WEBHOOK): destination refused: 169.254.169.254 is in 169.254.0.0/16 (Link Local)"},
		{"INVLEDGER_ALERT_WEBHOOK", "http://0x7f000001:9/alerts", "serve", "INVLEDGER_ALERT_WEBHOOK): destination refused: 127.0.0.1 is in 127.0.0.0/8 (Loopback)"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("INVLEDGER_DATABASE_URL", "postgres://127.0.0.1:1/x")
			t.Setenv(tc.env, tc.value)
			cmd := NewRootCmd()
			cmd.SetArgs(strings.Fields(tc.args))
			cmd.SetOut(io.Discard)
			err := cmd.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s", err, tc.want)
			}
		})
	}
}

func quietLogger() *slog.Logger { return Config{LogLevel: "error", LogFormat: "text"}.Logger() }
