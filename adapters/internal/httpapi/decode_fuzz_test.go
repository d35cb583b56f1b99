package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// FuzzDecodeDeduct feeds arbitrary bodies and SKUs to the deduct decoder.
// It must never panic; an accepted body must be a single valid JSON object
// whose command passes every domain validator; a refused one must be a
// *domain.FieldError naming a field of the request.
func FuzzDecodeDeduct(f *testing.F) {
	for _, seed := range []string{
		`{"user_id":"u1","qty":1,"request_id":"r1"}`,
		`{"user_id":"u1","qty":0,"request_id":"r1"}`,
		`{"user_id":"u1","qty":-1,"request_id":"r1"}`,
		`{"user_id":"u1","qty":1.5,"request_id":"r1"}`,
		`{"user_id":"u1","qty":"1","request_id":"r1"}`,
		`{"user_id":"","qty":1,"request_id":"r1"}`,
		`{"user_id":"u1","request_id":"r1"}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","x":1}`,
		`{"USER_ID":"u1","Qty":1,"request_id":"r1"}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","qty":2}`,
		`{"user_id":"u1","qty":1,"request_id":"r1"} x`,
		`{"user_id":"u1","qty":1,"request_id":"r1"}{}`,
		`{"user_id":"\u00e9\ud83d\ude00","qty":1e0,"request_id":"\u2028"}`,
		`{"user_id":"u1","qty":99999999999999999999,"request_id":"r1"}`,
		`null`, `[]`, `""`, `{`, ``, " ", "\xff", `{"user_id":"a\u0000"}`,
		` { "qty" : -0 , "user_id":"u1"}` + "\t\r\n", `{"qty":01}`, `{"qty":123456789012345678}`,
		`{"qty":1234567890123456789}`, `{"qty":-}`, `{"qty":1,}`, `{"user_id":"u\u0031"}`, "{\"user_id\":\"\x7f\"}",
	} {
		f.Add([]byte(seed), "sku-1", "")
	}
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "bad{sku}", "")
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "a b", "")
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "", "")
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku-1", "r1")
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku-1", "r2")
	f.Add([]byte(`{"user_id":"u1","qty":1}`), "sku-1", "k1")

	const maxBody = 1 << 10 // small, so the fuzzer reaches the limit
	fields := map[string]bool{"body": true, "sku": true, "user_id": true, "qty": true, "request_id": true, wire.HeaderIdempotencyKey: true}

	f.Fuzz(func(t *testing.T, data []byte, sku, key string) {
		// The hand parser accepts a subset of what decodeJSON does, and
		// reads it the same.
		var plain, full wire.DeductBody
		if parseDeductBody(data, &plain) {
			if err := decodeJSON(bytes.NewReader(data), &full); err != nil || !reflect.DeepEqual(plain, full) {
				t.Fatalf("parseDeductBody read %q as %+v, decodeJSON as %+v (%v)", data, plain, full, err)
			}
		}
		body := http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), maxBody)
		cmd, err := decodeDeduct(sku, key, body)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("refusal %v (%T) is not a *domain.FieldError", err, err)
			}
			if !fields[fe.Field] {
				t.Fatalf("refusal %q names field %q, not a field of the request", err, fe.Field)
			}
			if !strings.HasPrefix(err.Error(), fe.Field+": ") {
				t.Fatalf("refusal %q does not start with its field", err)
			}
			return
		}
		if len(data) > maxBody {
			t.Fatalf("accepted a body of %d bytes over the %d limit", len(data), maxBody)
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if bytes.TrimSpace(data)[0] != '{' {
			t.Fatalf("accepted a body that is not an object: %q", data)
		}
		if cmd.SKU.String() != sku {
			t.Fatalf("command SKU %q, path SKU %q", cmd.SKU, sku)
		}
		if _, err := domain.NewSKUID(cmd.SKU.String()); err != nil {
			t.Fatalf("accepted %q: sku: %v", data, err)
		}
		if _, err := domain.NewUserID(cmd.User.String()); err != nil {
			t.Fatalf("accepted %q: user_id: %v", data, err)
		}
		if _, err := domain.NewQuantity(cmd.Qty.Int64()); err != nil {
			t.Fatalf("accepted %q: qty: %v", data, err)
		}
		if _, err := domain.NewRequestID(cmd.RequestID.String()); err != nil {
			t.Fatalf("accepted %q: request_id: %v", data, err)
		}
		if key != "" && cmd.RequestID.String() != key {
			t.Fatalf("accepted %q with Idempotency-Key %q as request_id %q", data, key, cmd.RequestID)
		}
		// An accepted object holds the three known keys, spelt exactly,
		// each at most once (encoding/json alone would match names
		// case-insensitively and keep the last of duplicates).
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("accepted %q, which is not a JSON object: %v", data, err)
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatalf("accepted %q: %v", data, err)
			}
			k := tok.(string)
			if k != "user_id" && k != "qty" && k != "request_id" {
				t.Fatalf("accepted %q with unknown key %q", data, k)
			}
			if seen[k] {
				t.Fatalf("accepted %q with key %q twice", data, k)
			}
			seen[k] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("accepted %q: %v", data, err)
			}
		}
	})
}
