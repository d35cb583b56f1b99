package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// FuzzDecodeReserve feeds arbitrary bodies and SKUs to the reserve
// decoder. It must never panic; a refusal is a *domain.FieldError naming a
// field of the request, and an accepted body's command passes every domain
// validator, its ttl within 1 s and the maximum.
func FuzzDecodeReserve(f *testing.F) {
	for _, seed := range []string{
		`{"user_id":"u1","qty":1,"request_id":"r1"}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":60}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":0}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":3601}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":-1}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":1.5}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":"60"}`,
		`{"user_id":"u1","request_id":"r1","ttl_seconds":60}`,
		`{"user_id":"u1","qty":1}`,
		`{"user_id":"u1","qty":1,"request_id":"r1","ttl_seconds":60,"ttl_seconds":61}`,
		`null`, `{`, ``,
	} {
		f.Add([]byte(seed), "sku-1", "")
	}
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "bad{sku}", "")
	f.Add([]byte(`{"user_id":"u1","qty":1}`), "sku-1", "key-1")
	f.Add([]byte(`{"user_id":"u1","qty":1,"request_id":"r1"}`), "sku-1", "key-1")
	holds, err := ledger.NewHolds(nil, nil, domain.HoldConfig{})
	if err != nil {
		f.Fatal(err)
	}
	s := &server{holds: holds}
	fields := map[string]bool{"body": true, "sku": true, "user_id": true, "qty": true, "request_id": true, "ttl_seconds": true, wire.HeaderIdempotencyKey: true}
	f.Fuzz(func(t *testing.T, data []byte, sku, key string) {
		body := http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), 1<<10)
		cmd, err := s.decodeReserve(sku, key, body)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || !fields[fe.Field] || !strings.HasPrefix(err.Error(), fe.Field+": ") {
				t.Fatalf("refusal %v (%T) does not name a field of the request", err, err)
			}
			return
		}
		if cmd.SKU.String() != sku || cmd.TTL.Duration() < time.Second || cmd.TTL.Duration() > domain.DefaultHoldMaxTTL {
			t.Fatalf("accepted %q for %q as %+v", data, sku, cmd)
		}
		if _, err := domain.NewUserID(cmd.User.String()); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		if _, err := domain.NewRequestID(cmd.RequestID.String()); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		if key != "" && cmd.RequestID.String() != key {
			t.Fatalf("accepted %q with Idempotency-Key %q as request id %q", data, key, cmd.RequestID)
		}
		if _, err := domain.NewQuantity(cmd.Qty.Int64()); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
	})
}
