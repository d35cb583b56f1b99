package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// limited wraps s as a request body capped at the default limit, as the
// server does.
func limited(s string) io.Reader {
	return http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(s)), DefaultMaxBodyBytes)
}

// checkFieldError asserts err is a *domain.FieldError for field whose message
// contains every want.
func checkFieldError(t *testing.T, err error, field string, want ...string) {
	t.Helper()
	var fe *domain.FieldError
	if !errors.As(err, &fe) || !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("error %v (%T) is not a *domain.FieldError", err, err)
	}
	if fe.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, fe.Field, field)
	}
	if !strings.HasPrefix(fe.Error(), field+": ") {
		t.Fatalf("error %q does not start with %q", fe.Error(), field+": ")
	}
	for _, w := range want {
		if !strings.Contains(fe.Error(), w) {
			t.Fatalf("error %q does not contain %q", fe.Error(), w)
		}
	}
}

func TestDecodeDeduct(t *testing.T) {
	long := strings.Repeat("r", 129)
	tests := []struct {
		name      string
		sku, body string
		want      ledger.DeductCommand
		field     string // "" means accepted
		detail    string // substring of the error
	}{
		{name: "ok", sku: "s1", body: `{"user_id":"u1","qty":2,"request_id":"r1"}`,
			want: ledger.MustDeductCommand("s1", "u1", 2, "r1")},
		{name: "ok any order with whitespace", sku: "s1", body: "\n { \"request_id\" : \"r1\", \"qty\": 1 ,\"user_id\":\"ユーザー\" } \n\t",
			want: ledger.MustDeductCommand("s1", "ユーザー", 1, "r1")},
		{name: "request_id of 128", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"` + long[:128] + `"}`,
			want: ledger.MustDeductCommand("s1", "u", 1, long[:128])},

		{name: "qty 0", sku: "s1", body: `{"user_id":"u","qty":0,"request_id":"r"}`, field: "qty", detail: "positive integer"},
		{name: "qty -1", sku: "s1", body: `{"user_id":"u","qty":-1,"request_id":"r"}`, field: "qty"},
		{name: "qty 1.5", sku: "s1", body: `{"user_id":"u","qty":1.5,"request_id":"r"}`, field: "qty", detail: "must be an integer"},
		{name: "qty 1e2", sku: "s1", body: `{"user_id":"u","qty":1e2,"request_id":"r"}`, field: "qty", detail: "must be an integer"},
		{name: "qty string", sku: "s1", body: `{"user_id":"u","qty":"1","request_id":"r"}`, field: "qty", detail: "not string"},
		{name: "qty bool", sku: "s1", body: `{"user_id":"u","qty":true,"request_id":"r"}`, field: "qty"},
		{name: "qty overflow", sku: "s1", body: `{"user_id":"u","qty":99999999999999999999,"request_id":"r"}`, field: "qty"},
		{name: "qty over max", sku: "s1", body: `{"user_id":"u","qty":1000000001,"request_id":"r"}`, field: "qty"},
		{name: "qty missing", sku: "s1", body: `{"user_id":"u","request_id":"r"}`, field: "qty", detail: "required"},
		{name: "qty null", sku: "s1", body: `{"user_id":"u","qty":null,"request_id":"r"}`, field: "qty", detail: "must not be null"},
		{name: "user_id empty", sku: "s1", body: `{"user_id":"","qty":1,"request_id":"r"}`, field: "user_id"},
		{name: "user_id missing", sku: "s1", body: `{"qty":1,"request_id":"r"}`, field: "user_id"},
		{name: "user_id number", sku: "s1", body: `{"user_id":7,"qty":1,"request_id":"r"}`, field: "user_id", detail: "must be a string"},
		{name: "user_id control char", sku: "s1", body: `{"user_id":"a\u0000","qty":1,"request_id":"r"}`, field: "user_id"},
		{name: "request_id 129", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"` + long + `"}`, field: "request_id"},
		{name: "request_id missing", sku: "s1", body: `{"user_id":"u","qty":1}`, field: "request_id"},
		{name: "sku braces", sku: "bad{sku}", body: `{"user_id":"u","qty":1,"request_id":"r"}`, field: "sku"},
		{name: "sku space", sku: "a b", body: `{"user_id":"u","qty":1,"request_id":"r"}`, field: "sku"},
		{name: "sku empty", sku: "", body: `{"user_id":"u","qty":1,"request_id":"r"}`, field: "sku"},
		{name: "unknown field", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r","x":1}`, field: "body", detail: `unknown field "x"`},
		{name: "duplicate qty", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r","qty":5}`, field: "qty", detail: "more than once"},
		{name: "duplicate user_id", sku: "s1", body: `{"user_id":"u","qty":1,"user_id":"v","request_id":"r"}`, field: "user_id", detail: "more than once"},
		{name: "duplicate via escape", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r","q\u0074y":5}`, field: "qty", detail: "more than once"},
		{name: "key in upper case", sku: "s1", body: `{"user_id":"u","QTY":3,"request_id":"r"}`, field: "body", detail: `unknown field "QTY": keys are case-sensitive, this one is "qty"`},
		{name: "key in mixed case", sku: "s1", body: `{"User_Id":"u","qty":1,"request_id":"r"}`, field: "body", detail: `unknown field "User_Id"`},
		{name: "key folded by Unicode", sku: "s1", body: `{"user_id":"u","qty":1,"reque\u017ft_id":"r"}`, field: "body", detail: "unknown field"},
		{name: "case twin of a given key", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r","Qty":2}`, field: "body", detail: `unknown field "Qty"`},
		{name: "ok nested-looking string values", sku: "s1", body: `{"user_id":"{\"qty\":9}","qty":1,"request_id":"r,\"qty\""}`,
			want: ledger.MustDeductCommand("s1", `{"qty":9}`, 1, `r,"qty"`)},
		{name: "malformed", sku: "s1", body: `{"user_id":"u",`, field: "body", detail: "malformed JSON"},
		{name: "syntax error", sku: "s1", body: `{"user_id" "u"}`, field: "body", detail: "malformed JSON"},
		{name: "empty body", sku: "s1", body: ``, field: "body", detail: "empty"},
		{name: "whitespace body", sku: "s1", body: " \n", field: "body", detail: "empty"},
		{name: "trailing garbage", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r"}x`, field: "body", detail: "after the JSON object"},
		{name: "two objects", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r"}{}`, field: "body", detail: "after the JSON object"},
		{name: "array", sku: "s1", body: `[1]`, field: "body", detail: "must be a JSON object"},
		{name: "string", sku: "s1", body: `"x"`, field: "body", detail: "must be a JSON object"},
		{name: "too large", sku: "s1", body: `{"user_id":"` + strings.Repeat("u", DefaultMaxBodyBytes) + `","qty":1,"request_id":"r"}`,
			field: "body", detail: "larger than 65536 bytes"},
		{name: "too large after the object", sku: "s1", body: `{"user_id":"u","qty":1,"request_id":"r"}` + strings.Repeat(" ", DefaultMaxBodyBytes),
			field: "body", detail: "larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeDeduct(tt.sku, "", limited(tt.body))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("decodeDeduct: %v", err)
				}
				if got != tt.want {
					t.Fatalf("decodeDeduct = %+v, want %+v", got, tt.want)
				}
				return
			}
			checkFieldError(t, err, tt.field, tt.detail)
		})
	}
}

func TestDecodeRelease(t *testing.T) {
	got, err := decodeRelease("s1", limited(`{"user_id":"u","request_id":"r","reason":"refund"}`))
	if err != nil || got != (ledger.MustReleaseCommand("s1", "u", "r", "refund")) {
		t.Fatalf("decodeRelease = %+v, %v", got, err)
	}
	if _, err := decodeRelease("s1", limited(`{"user_id":"u","request_id":"r"}`)); err != nil {
		t.Fatalf("reason is optional: %v", err)
	}
	checkFieldError(t, mustErr(decodeRelease("s1", limited(`{"user_id":"u"}`))), "request_id")
	checkFieldError(t, mustErr(decodeRelease("s1", limited(`{"request_id":"r"}`))), "user_id")
	checkFieldError(t, mustErr(decodeRelease("s1", limited(`{"user_id":"u","request_id":"r","reason":"`+strings.Repeat("x", 257)+`"}`))), "reason")
	checkFieldError(t, mustErr(decodeRelease("s1", limited(`{"user_id":"u","request_id":"r","qty":1}`))), "body", `unknown field "qty"`)
	checkFieldError(t, mustErr(decodeRelease("a/b", limited(`{"user_id":"u","request_id":"r"}`))), "sku")
}

func TestDecodeCreateSKU(t *testing.T) {
	got, err := decodeCreateSKU("s1", limited(`{"stock":10}`))
	if err != nil || got != (ledger.CreateSKUCommand{SKU: "s1", Stock: 10, PerUserLimit: 1}) {
		t.Fatalf("default limit: %+v, %v", got, err)
	}
	got, err = decodeCreateSKU("s1", limited(`{"stock":0,"per_user_limit":3}`))
	if err != nil || got != (ledger.CreateSKUCommand{SKU: "s1", Stock: 0, PerUserLimit: 3}) {
		t.Fatalf("explicit limit: %+v, %v", got, err)
	}
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{}`))), "stock", "required")
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{"stock":-1}`))), "stock")
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{"stock":1.5}`))), "stock", "integer")
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{"stock":1,"per_user_limit":0}`))), "per_user_limit")
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{"stock":1,"per_user_limit":-2}`))), "per_user_limit")
	checkFieldError(t, mustErr(decodeCreateSKU("s1", limited(`{"stock":1,"limit":2}`))), "body", `unknown field "limit"`)
	checkFieldError(t, mustErr(decodeCreateSKU("{x}", limited(`{"stock":1}`))), "sku")
}

// TestEveryWriteBodyRefusesDuplicateAndCaseKeys runs the strict key check
// over every request body type the API decodes.
func TestEveryWriteBodyRefusesDuplicateAndCaseKeys(t *testing.T) {
	for _, tc := range []struct {
		dst          any
		good, dup    string
		upper, field string
	}{
		{&wire.DeductBody{}, `{"user_id":"u","qty":1,"request_id":"r"}`, `{"user_id":"u","qty":1,"qty":5,"request_id":"r"}`, `{"user_id":"u","QTY":1,"request_id":"r"}`, "qty"},
		{&wire.ReleaseBody{}, `{"user_id":"u","request_id":"r"}`, `{"user_id":"u","request_id":"r","request_id":"s"}`, `{"User_ID":"u","request_id":"r"}`, "request_id"},
		{&wire.CreateSKUBody{}, `{"stock":1,"per_user_limit":1}`, `{"stock":1,"stock":9}`, `{"Stock":1}`, "stock"},
		{&wire.AdjustmentBody{}, `{"sku":"s","delta":1,"reason":"x"}`, `{"sku":"s","delta":1,"delta":-9}`, `{"sku":"s","DELTA":1}`, "delta"},
		{&wire.ReconcileBody{}, `{"sku":"s","repair":true}`, `{"repair":false,"repair":true}`, `{"Repair":true}`, "repair"},
	} {
		name := reflect.TypeOf(tc.dst).Elem().Name()
		if err := decodeJSON(limited(tc.good), tc.dst); err != nil {
			t.Fatalf("%s: good body refused: %v", name, err)
		}
		checkFieldError(t, decodeJSON(limited(tc.dup), tc.dst), tc.field, "given more than once")
		checkFieldError(t, decodeJSON(limited(tc.upper), tc.dst), "body", "unknown field", "case-sensitive")
	}
}

func mustErr[T any](_ T, err error) error { return err }

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "ctl \x00\x01\x1f\x7f", "\n\r\t", "ユーザー 😀",
		"bad \xff utf8 \xed\xa0\x80", "sep \u2028 \u2029", "<html>&", strings.Repeat("x", 300),
	} {
		got := appendJSONString(nil, s)
		if !json.Valid(got) {
			t.Fatalf("appendJSONString(%q) = %s is not valid JSON", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s) // encoding/json also maps bad UTF-8 to U+FFFD
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("appendJSONString(%q) decodes to %q, encoding/json's to %q", s, back, wantBack)
		}
	}
}

// TestAppendBodies: the hand-written bodies of the hot paths are the
// apiwire types the client decodes, key for key: each decodes strictly
// into its type and encodes back to the same bytes.
func TestAppendBodies(t *testing.T) {
	var deduct wire.ReceiptJSON
	b := appendDeductReceipt(nil, 42, -0, "0190-ab")
	if err := decodeAsWritten(b, &deduct); err != nil || deduct.Status != "ok" || deduct.Seq != 42 || deduct.Remaining != 0 || deduct.EventID != "0190-ab" {
		t.Fatalf("deduct body %s: %+v %v", b, deduct, err)
	}
	var rel wire.ReleaseReceiptJSON
	b = appendReleaseReceipt(nil, "e1", 7, true)
	if err := decodeAsWritten(b, &rel); err != nil || rel.Status != "released" || rel.EventID != "e1" || rel.Seq != 7 || !rel.AlreadyReleased {
		t.Fatalf("release body %s: %+v %v", b, rel, err)
	}
	var e wire.ErrorJSON
	b = appendError(nil, "invalid_request", "must be \"x\"\n", "qty", "trace-1")
	if err := decodeAsWritten(b, &e); err != nil || e.Error != "invalid_request" || e.Detail != "must be \"x\"\n" || e.Field != "qty" || e.TraceID != "trace-1" {
		t.Fatalf("error body %s: %+v %v", b, e, err)
	}
	if err := decodeAsWritten(appendError(nil, "not_found", "", "", ""), &wire.ErrorJSON{}); err != nil {
		t.Fatalf("bare error body: %v", err)
	}
}

// decodeAsWritten decodes b into v refusing unknown keys, and fails unless
// v encodes back to b.
func decodeAsWritten(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	again, err := json.Marshal(v)
	if err == nil && !bytes.Equal(again, b) {
		err = fmt.Errorf("encodes back to %s", again)
	}
	return err
}
