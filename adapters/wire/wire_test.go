package wire_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/docs"
)

// spec loads docs/openapi.yaml, the description the server is checked
// against.
func spec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// jsonKeys returns the keys a struct type encodes to, embedded structs'
// included, and fails on a field with no json tag.
func jsonKeys(t *testing.T, typ reflect.Type) []string {
	t.Helper()
	var keys []string
	for f := range typ.Fields() {
		tag, ok := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			keys = append(keys, jsonKeys(t, f.Type)...)
			continue
		}
		if !ok || name == "" {
			t.Errorf("%s.%s has no json name: its key would follow the Go field's name", typ.Name(), f.Name)
			continue
		}
		if name != "-" {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}

// TestBodiesHaveTheSpecsKeys: each body's JSON keys are exactly its schema's
// properties in docs/openapi.yaml, so a key renamed or added on one side
// only is caught here, without a server.
func TestBodiesHaveTheSpecsKeys(t *testing.T) {
	doc := spec(t)
	component := func(name string) *openapi3.Schema {
		ref := doc.Components.Schemas[name]
		if ref == nil || ref.Value == nil {
			t.Fatalf("docs/openapi.yaml has no schema %s", name)
		}
		return ref.Value
	}
	requestBody := func(method, path string) *openapi3.Schema {
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil || item.GetOperation(method).RequestBody == nil {
			t.Fatalf("docs/openapi.yaml has no request body for %s %s", method, path)
		}
		mt := item.GetOperation(method).RequestBody.Value.Content.Get("application/json")
		if mt == nil {
			t.Fatalf("%s %s takes no JSON", method, path)
		}
		return mt.Schema.Value
	}
	// property returns the inline schema of one property of s.
	property := func(s *openapi3.Schema, name string) *openapi3.Schema {
		p := s.Properties[name]
		if p == nil {
			t.Fatalf("no property %s", name)
		}
		if p.Value.Items != nil {
			return p.Value.Items.Value
		}
		return p.Value
	}
	finding := component("Finding")
	for _, tc := range []struct {
		body   any
		schema *openapi3.Schema
	}{
		{wire.ErrorJSON{}, component("Error")},
		{wire.ReceiptJSON{}, component("DeductReceipt")},
		{wire.ReleaseReceiptJSON{}, component("ReleaseReceipt")},
		{wire.SKUJSON{}, component("SKUDefinition")},
		{wire.WarmJSON{}, component("Warm")},
		{wire.SKUViewJSON{}, component("SKUView")},
		{wire.SKUItemJSON{}, component("SKUItem")},
		{wire.SKUPageJSON{}, component("SKUPage")},
		{wire.CloseJSON{}, component("Closed")},
		{wire.RetireJSON{}, component("Retired")},
		{wire.HoldJSON{}, component("Hold")},
		{wire.OrderJSON{}, component("Order")},
		{wire.OrderLineJSON{}, property(component("Order"), "lines")},
		{wire.AuditEntryJSON{}, component("AuditEntry")},
		{wire.HistoryPageJSON{}, component("HistoryPage")},
		{wire.UserPageJSON{}, component("UserPage")},
		{wire.BuyersJSON{}, component("Buyers")},
		{wire.HoldingJSON{}, property(component("Buyers"), "buyers")},
		{wire.StockAtJSON{}, component("StockAt")},
		{wire.OperationJSON{}, component("Operation")},
		{wire.OperationPageJSON{}, component("OperationPage")},
		{wire.FiguresJSON{}, component("Figures")},
		{wire.SeqRangeJSON{}, component("SeqRange")},
		{wire.FindingJSON{}, finding},
		{wire.LostReceiptJSON{}, property(finding, "lost")},
		{wire.ReconcileReportJSON{}, component("ReconcileReport")},
		{wire.RecordedFindingJSON{}, component("RecordedFinding")},
		{wire.RunJSON{}, component("Run")},
		{wire.RunPageJSON{}, component("RunPage")},
		{wire.AdjustmentJSON{}, component("Adjustment")},
		{wire.AdjustmentPageJSON{}, component("AdjustmentPage")},
		{wire.DeadLetterJSON{}, component("DeadLetter")},
		{wire.DeadLetterPageJSON{}, component("DeadLetterPage")},
		{wire.WebhookJSON{}, component("WebhookWithSecret")},
		{wire.CreateSKUBody{}, requestBody("PUT", "/v1/skus/{sku}")},
		{wire.DeductBody{}, requestBody("POST", "/v1/skus/{sku}/deduct")},
		{wire.ReleaseBody{}, requestBody("POST", "/v1/skus/{sku}/release")},
		{wire.ReserveBody{}, requestBody("POST", "/v1/skus/{sku}/holds")},
		{wire.PlaceOrderBody{}, requestBody("POST", "/v1/orders")},
		{wire.OrderLineBody{}, property(requestBody("POST", "/v1/orders"), "lines")},
		{wire.AdjustmentBody{}, requestBody("POST", "/v1/adjustments")},
		{wire.ReconcileBody{}, requestBody("POST", "/v1/reconcile")},
		{wire.WebhookBody{}, requestBody("POST", "/v1/webhooks")},
		{wire.ResolveBody{}, requestBody("POST", "/v1/dead-letters/{id}/resolve")},
	} {
		typ := reflect.TypeOf(tc.body)
		got := strings.Join(jsonKeys(t, typ), " ")
		want := strings.Join(slices.Sorted(maps.Keys(tc.schema.Properties)), " ")
		if got != want {
			t.Errorf("%s encodes keys\n  %s\nits schema in docs/openapi.yaml has\n  %s", typ.Name(), got, want)
		}
	}
}

// TestKeysAreSnakeCase: every key of every body is lower snake case, the
// API's one convention.
func TestKeysAreSnakeCase(t *testing.T) {
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	for _, body := range []any{
		wire.ErrorJSON{}, wire.ReceiptJSON{}, wire.ReleaseReceiptJSON{}, wire.SKUJSON{}, wire.WarmJSON{}, wire.EventJSON{},
		wire.SKUViewJSON{}, wire.SKUItemJSON{}, wire.SKUPageJSON{}, wire.CloseJSON{}, wire.RetireJSON{},
		wire.HoldJSON{}, wire.OrderJSON{}, wire.OrderLineJSON{}, wire.AuditEntryJSON{}, wire.HistoryPageJSON{},
		wire.UserPageJSON{}, wire.BuyersJSON{}, wire.HoldingJSON{}, wire.StockAtJSON{}, wire.OperationJSON{},
		wire.OperationPageJSON{}, wire.FiguresJSON{}, wire.SeqRangeJSON{}, wire.FindingJSON{}, wire.LostReceiptJSON{},
		wire.ReconcileReportJSON{}, wire.RecordedFindingJSON{}, wire.RecordedFiguresJSON{}, wire.RunJSON{},
		wire.RunPageJSON{}, wire.AdjustmentJSON{}, wire.AdjustmentPageJSON{}, wire.DeadLetterJSON{},
		wire.DeadLetterPageJSON{}, wire.WebhookJSON{}, wire.WebhookListJSON{}, wire.CreateSKUBody{},
		wire.DeductBody{}, wire.ReleaseBody{}, wire.ReserveBody{}, wire.PlaceOrderBody{}, wire.OrderLineBody{},
		wire.AdjustmentBody{}, wire.ReconcileBody{}, wire.WebhookBody{}, wire.ResolveBody{},
	} {
		typ := reflect.TypeOf(body)
		for _, k := range jsonKeys(t, typ) {
			if !snake.MatchString(k) {
				t.Errorf("%s has key %q, which is not snake_case", typ.Name(), k)
			}
		}
	}
}

// TestBodiesRoundTrip: what one side encodes, the other decodes to the same
// value; pointers keep null apart from zero, and times keep their instant.
func TestBodiesRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 123456789, time.UTC)
	zero, seven := int64(0), int64(7)
	after := "sku-b"
	for _, v := range []any{
		&wire.ReceiptJSON{Status: "ok", Seq: 3, Remaining: 97, EventID: "e1"},
		&wire.SKUViewJSON{SKU: "a", RedisStock: &zero, LedgerStock: nil, RedisSeq: &seven, State: "live", InitialStock: 100, PerUserLimit: 1},
		&wire.SKUPageJSON{SKUs: []wire.SKUItemJSON{{SKU: "a", RedisStock: &zero}}, NextAfter: &after},
		&wire.HoldJSON{HoldID: "h", SKU: "a", UserID: "u", Qty: 2, Status: "held", ExpiresAt: at, Seq: 4, Remaining: &zero, OrderID: "o"},
		&wire.OrderJSON{OrderID: "o", UserID: "u", Status: "held", ExpiresAt: at, Lines: []wire.OrderLineJSON{{SKU: "a", Qty: 1, HoldID: "h", Status: "none"}}},
		&wire.ReconcileReportJSON{RunID: 9, Trigger: "manual", Started: at, Finished: at.Add(time.Second), Checked: 2,
			Drifts: []wire.FindingJSON{{SKU: "a", Class: "redis_low", Before: wire.FiguresJSON{RedisStock: &zero, TruthStock: 1},
				After: &wire.FiguresJSON{RedisStock: &seven}, MissingSeqs: []wire.SeqRangeJSON{{From: 2, To: 3}},
				Lost: []wire.LostReceiptJSON{{Seq: 5, EventID: "e", RequestID: "r", User: "u", Qty: 1}}, Repaired: true}}},
		&wire.RecordedFindingJSON{SKU: "a", Class: "ledger_gap", Before: wire.RecordedFiguresJSON{
			FiguresJSON: wire.FiguresJSON{LedgerSeq: 4}, MissingSeqs: []wire.SeqRangeJSON{{From: 5, To: 5}}}},
		&wire.PlaceOrderBody{OrderID: "o", UserID: "u", TTLSeconds: &seven, Lines: []wire.OrderLineBody{{SKU: "a", Qty: 1}}},
		&wire.CreateSKUBody{Stock: &zero, PerUserLimit: &seven},
		&wire.EventJSON{EventID: "e", SKU: "a", Seq: 2, Type: "reserved", Delta: -1, Qty: 1, BalanceAfter: 4, UserID: "u",
			RequestID: "r", OccurredAt: at, HoldID: "h", OrderID: "o", ExpiresAt: &at},
		&wire.EventJSON{EventID: "e", SKU: "a", Seq: 3, Type: "deducted", OccurredAt: at},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		back := reflect.New(reflect.TypeOf(v).Elem())
		if err := json.Unmarshal(b, back.Interface()); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(back.Interface(), v) {
			t.Errorf("%T does not survive a round trip:\n sent %+v\n  got %+v\n json %s", v, v, back.Interface(), b)
		}
	}
	// A missing required pointer stays nil, which the server refuses by
	// field name; zero is a value.
	var body wire.CreateSKUBody
	if err := json.Unmarshal([]byte(`{"stock":0}`), &body); err != nil {
		t.Fatal(err)
	}
	if body.Stock == nil || *body.Stock != 0 || body.PerUserLimit != nil {
		t.Errorf(`{"stock":0} decoded to stock %v, per_user_limit %v: want 0 and nil`, body.Stock, body.PerUserLimit)
	}
}
