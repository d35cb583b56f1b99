package tracing_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/internal/observe/tracing"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/projections/streamentry"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

func TestEnabledFollowsTheOTELVariables(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
		err  bool
	}{
		{map[string]string{}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
	} {
		got, err := tracing.Enabled(func(k string) string { return c.env[k] })
		if got != c.want || (err != nil) != c.err {
			t.Errorf("Enabled(%v) = %v %v, want %v, error %v", c.env, got, err, c.want, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
			t.Errorf("error %q does not name the variable", err)
		}
	}
}

// TestAPurchaseTraceLinksToTheBatchThatWroteIt runs a real serve (API and
// projector) with the SDK's in-memory exporter: a sampled purchase has a
// server span and a batch.lua child, its stream entry carries its
// traceparent, and the projector batch that wrote it into the ledger, with
// its ledger.commit child, links to it. An unsampled purchase (traceparent
// flags 00) starts no script span and its entry carries nothing. A
// reconciliation run has its span.
func TestAPurchaseTraceLinksToTheBatchThatWroteIt(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Install(tp)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	st := stacktest.New(t)
	st.SKU(t, "trace-1", 10, 1)
	const gw = "trace-gateway-secret-01"
	listening := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, st.App, server.Config{Components: []string{server.ComponentAPI, server.ComponentProjector},
			Listen: "127.0.0.1:0", Tokens: "shop:gateway:" + gw, DataDir: t.TempDir(), OnListening: func(a string) { listening <- a }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	var base string
	select {
	case a := <-listening:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not listen")
	}

	buy := func(user, traceparent string) {
		req, err := http.NewRequest("POST", base+"/v1/skus/trace-1/deduct", strings.NewReader(`{"user_id":"`+user+`","qty":1,"request_id":"`+user+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+gw)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("purchase by %s: %d", user, resp.StatusCode)
		}
	}
	buy("sampled", "")
	const unsampledTrace = "0af7651916cd43dd8448eb211c80319c"
	buy("unsampled", "00-"+unsampledTrace+"-b7ad6b7169203331-00")
	st.WaitProjected(t, "trace-1", 30*time.Second)
	if _, err := st.App.Reconciler.Run(context.Background(), reconcile.Options{SKUs: []string{"trace-1"}, Trigger: "cli"}); err != nil {
		t.Fatal(err)
	}

	var request, script, batch, commit, run *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		s := &spans[i]
		switch s.Name {
		case "POST /v1/skus/{sku}/deduct":
			if s.SpanContext.TraceID().String() != unsampledTrace {
				request = s
			}
		case "batch.lua":
			script = s
		case "reconcile.run":
			run = s
		}
	}
	if request == nil || script == nil || run == nil {
		t.Fatalf("spans missing (request %v, script %v, reconcile %v) among %v", request != nil, script != nil, run != nil, names(spans))
	}
	if script.SpanContext.TraceID() != request.SpanContext.TraceID() || script.Parent.SpanID() != request.SpanContext.SpanID() {
		t.Errorf("batch.lua is not a child of the request span")
	}
	for i := range spans {
		s := &spans[i]
		if s.Name == "batch.lua" && s.SpanContext.TraceID().String() == unsampledTrace {
			t.Errorf("the unsampled purchase started a script span")
		}
		if s.Name != "projector.batch" {
			continue
		}
		for _, l := range s.Links {
			if l.SpanContext.TraceID() == script.SpanContext.TraceID() && l.SpanContext.SpanID() == script.SpanContext.SpanID() {
				batch = s
			}
		}
	}
	if batch == nil {
		t.Fatalf("no projector.batch span links to the purchase's batch.lua span; spans %v", names(spans))
	}
	for i := range spans {
		if s := &spans[i]; s.Name == "ledger.commit" && s.Parent.SpanID() == batch.SpanContext.SpanID() {
			commit = s
		}
	}
	if commit == nil {
		t.Errorf("the linked batch has no ledger.commit child")
	}

	// The entries: one field for the sampled purchase, none for the other.
	msgs, err := st.App.Redis.XRange(context.Background(), st.Keyspace.SKUStreamKey("trace-1"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var carried int
	for _, m := range msgs {
		e, err := streamentry.ParseMessage(m)
		if err != nil || e.SKU != "trace-1" {
			continue
		}
		switch e.User {
		case "sampled":
			if sc := tracing.SpanContextOf(e.TraceParent); sc.TraceID() != script.SpanContext.TraceID() {
				t.Errorf("the sampled purchase's entry carries traceparent %q", e.TraceParent)
			}
			carried++
		case "unsampled":
			if e.TraceParent != "" || m.Values["tp"] != nil {
				t.Errorf("the unsampled purchase's entry carries traceparent %q", e.TraceParent)
			}
		}
	}
	if carried != 1 {
		t.Errorf("%d entries of the sampled purchase, want 1", carried)
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"@"+s.SpanContext.TraceID().String()[:8])
	}
	return out
}
