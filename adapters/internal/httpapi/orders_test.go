package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// FuzzDecodePlaceOrder feeds arbitrary bodies to the order decoder. It must
// never panic; a refusal is a *domain.FieldError naming a member of the
// order (lines[i].sku; lines.sku for a value of the wrong type), and an
// accepted order has 1 to MaxLines lines of distinct valid SKUs and
// quantities, a valid order and user id, and a ttl within 1 s and the
// maximum.
func FuzzDecodePlaceOrder(f *testing.F) {
	for _, seed := range []string{
		`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1}]}`,
		`{"order_id":"o1","user_id":"u1","ttl_seconds":60,"lines":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`,
		`{"order_id":"o1","user_id":"u1","lines":[]}`,
		`{"order_id":"o1","user_id":"u1"}`,
		`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1},{"sku":"a","qty":1}]}`,
		`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":0}]}`,
		`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1,"x":1}]}`,
		`{"order_id":"o1","user_id":"u1","ttl_seconds":0,"lines":[{"sku":"a","qty":1}]}`,
		`{"order_id":"","user_id":"u1","lines":[{"sku":"a","qty":1}]}`,
		`{"order_id":"o1","user_id":"u1","lines":[{"sku":"","qty":1}]}`,
		`{"order_id":"o1","user_id":"u1","lines":{"sku":"a"}}`,
		`null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	orders := newTestOrders(f, 3)
	field := regexp.MustCompile(`^(body|order_id|user_id|ttl_seconds|lines|lines(\[[0-9]+\])?\.(sku|qty))$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		body := http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(data)), 4<<10)
		cmd, err := decodePlaceOrder(orders, body)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || !field.MatchString(fe.Field) {
				t.Fatalf("refusal %v (%T) does not name a member of the order", err, err)
			}
			return
		}
		if n := len(cmd.Lines); n < 1 || n > 3 {
			t.Fatalf("accepted %q with %d lines", data, n)
		}
		if _, err := domain.NewOrderID(cmd.OrderID.String()); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		if _, err := domain.NewUserID(cmd.User.String()); err != nil {
			t.Fatalf("accepted %q: %v", data, err)
		}
		if cmd.TTL.Duration() < time.Second || cmd.TTL.Duration() > domain.DefaultHoldMaxTTL {
			t.Fatalf("accepted %q with ttl %s", data, cmd.TTL.Duration())
		}
		seen := map[string]bool{}
		for _, l := range cmd.Lines {
			if seen[l.SKU.String()] || l.User != cmd.User || l.TTL != cmd.TTL {
				t.Fatalf("accepted %q as %+v", data, cmd)
			}
			seen[l.SKU.String()] = true
			if _, err := domain.NewQuantity(l.Qty.Int64()); err != nil {
				t.Fatalf("accepted %q: %v", data, err)
			}
		}
	})
}

func newTestOrders(t testing.TB, maxLines int) *ledger.Orders {
	holds, err := ledger.NewHolds(nil, nil, domain.HoldConfig{})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := ledger.NewOrders(nil, nil, holds, domain.OrderConfig{MaxLines: maxLines})
	if err != nil {
		t.Fatal(err)
	}
	return orders
}

// TestDecodePlaceOrderNamesTheField checks the refusals the issue lists:
// each names the member at fault.
func TestDecodePlaceOrderNamesTheField(t *testing.T) {
	orders := newTestOrders(t, 2)
	for _, tc := range []struct{ body, field string }{
		{`{"order_id":"o1","user_id":"u1","lines":[]}`, "lines"},
		{`{"order_id":"o1","user_id":"u1"}`, "lines"},
		{`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1},{"sku":"b","qty":1},{"sku":"c","qty":1}]}`, "lines"},
		{`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1},{"sku":"a","qty":2}]}`, "lines[1].sku"},
		{`{"order_id":"o1","user_id":"u1","lines":[{"sku":"a","qty":1},{"sku":"b","qty":0}]}`, "lines[1].qty"},
		{`{"order_id":"o1","user_id":"u1","ttl_seconds":0,"lines":[{"sku":"a","qty":1}]}`, "ttl_seconds"},
		{`{"order_id":"o1","user_id":"u1","ttl_seconds":3601,"lines":[{"sku":"a","qty":1}]}`, "ttl_seconds"},
		{`{"order_id":"","user_id":"u1","lines":[{"sku":"a","qty":1}]}`, "order_id"},
	} {
		_, err := decodePlaceOrder(orders, bytes.NewReader([]byte(tc.body)))
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v, want a refusal naming %s", tc.body, err, tc.field)
		}
	}
}
