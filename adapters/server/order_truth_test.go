package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
)

// TestAnUndoneOrderLineReadsAsReleased drives a real serve (API, hold
// expiry and projector over a private Redis and PostgreSQL) through the
// two ways an order line's sale is undone after its confirm, and checks
// that every answer says so:
//
//   - a two-line order with a 2 s ttl, line 0 confirmed through the hold
//     route, line 1 left to expire: the expiry releases line 0. The
//     ledger's rows of the order (by order_id alone) hold that release,
//     with line 0's hold id; the hold reads as released; the order as
//     expired, and its retried confirm is refused by the expired line;
//   - a confirmed order one of whose lines is refunded (released by its
//     request id): the order reads as partial, its retried confirm answers
//     the very body its GET does, and the hold refuses confirm and cancel
//     as hold_released.
func TestAnUndoneOrderLineReadsAsReleased(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	const gw, op = "truth-gateway-secret-1", "truth-operator-secret1"
	base := startServe(t, st, Config{
		Components: []string{ComponentAPI, ComponentProjector},
		Tokens:     "shop:gateway:" + gw + ",olga:operator:" + op,
	})
	c := newSpecClient(t, base)
	for _, sku := range []string{"truth-a", "truth-b"} {
		c.do(201, "PUT", "/v1/skus/"+sku, op, `{"stock":10,"per_user_limit":5}`)
		c.do(200, "POST", "/v1/skus/"+sku+"/warm", op, "")
	}
	type order struct {
		Status string `json:"status"`
		Lines  []struct {
			HoldID string `json:"hold_id"`
			Status string `json:"status"`
		} `json:"lines"`
	}
	decode := func(a answer) order {
		t.Helper()
		var o order
		if err := json.Unmarshal([]byte(a.body), &o); err != nil || len(o.Lines) != 2 {
			t.Fatalf("not a two-line order: %s (%v)", a.body, err)
		}
		return o
	}
	holdStatus := func(path string) string {
		t.Helper()
		var h struct {
			Status string `json:"status"`
		}
		if a := c.do(200, "GET", path, gw, ""); json.Unmarshal([]byte(a.body), &h) != nil {
			t.Fatalf("GET %s: %s", path, a.body)
		}
		return h.Status
	}

	// Undone by the expiry of another line.
	placed := decode(c.do(201, "POST", "/v1/orders", gw,
		`{"order_id":"undone","user_id":"buyer","ttl_seconds":2,"lines":[{"sku":"truth-a","qty":2},{"sku":"truth-b","qty":3}]}`))
	line0 := "/v1/skus/truth-a/holds/" + placed.Lines[0].HoldID
	c.do(200, "POST", line0+"/confirm", gw, "")
	var got order
	localstacktest.WaitFor(t, "order undone to read expired 13 s after its deadline", 15*time.Second, func() bool {
		was := got.Status
		if got = decode(c.do(200, "GET", "/v1/orders/undone", gw, "")); got.Status != was {
			t.Logf("order undone: %+v", got)
		}
		return got.Status == "expired"
	})
	if got.Lines[0].Status != "released" || got.Lines[1].Status != "expired" {
		t.Errorf("lines of the undone order = %+v; want released, expired", got.Lines)
	}
	if s := holdStatus(line0); s != "released" {
		t.Errorf("GET of line 0's hold = %s, want released", s)
	}
	if a := c.do(409, "POST", "/v1/orders/undone/confirm", gw, ""); !strings.Contains(a.body, `"error":"hold_expired"`) ||
		!strings.Contains(a.body, `"field":"lines[1]"`) {
		t.Errorf("retried confirm of the undone order = %s; want line 1's hold_expired", a.body)
	}
	// The ledger alone: every row of the order, found by its order_id.
	want := fmt.Sprintf("truth-a reserved %[1]s, truth-a confirmed %[1]s, truth-a released %[1]s, truth-b reserved %[2]s, truth-b expired %[2]s",
		placed.Lines[0].HoldID, placed.Lines[1].HoldID)
	rows := "-"
	localstacktest.WaitFor(t, "the ledger's rows of order undone to be\n "+want, 15*time.Second, func() bool {
		was := rows
		if err := st.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(sku || ' ' || type || ' ' || coalesce(hold_id::text, '-'), ', ' ORDER BY sku, seq), '')
FROM ledger_entries WHERE order_id = 'undone'`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != was {
			t.Logf("the ledger's rows of order undone:\n %s", rows)
		}
		return rows == want
	})

	// Undone by a refund of one line.
	refunded := decode(c.do(201, "POST", "/v1/orders", gw,
		`{"order_id":"refunded","user_id":"buyer2","ttl_seconds":60,"lines":[{"sku":"truth-a","qty":1},{"sku":"truth-b","qty":1}]}`))
	if o := decode(c.do(200, "POST", "/v1/orders/refunded/confirm", gw, "")); o.Status != "confirmed" {
		t.Fatalf("confirm = %+v", o)
	}
	id, _ := domain.NewOrderID("refunded")
	sku, _ := domain.NewSKUID("truth-a")
	c.do(200, "POST", "/v1/skus/truth-a/release", gw, fmt.Sprintf(`{"user_id":"buyer2","request_id":%q,"reason":"refund"}`, id.LineRequestID(sku)))
	shown := c.do(200, "GET", "/v1/orders/refunded", gw, "")
	if o := decode(shown); o.Status != "partial" || o.Lines[0].Status != "released" || o.Lines[1].Status != "confirmed" {
		t.Errorf("GET of the refunded order = %s; want partial, line 0 released", shown.body)
	}
	if again := c.do(200, "POST", "/v1/orders/refunded/confirm", gw, ""); again.body != shown.body {
		t.Errorf("retried confirm of the refunded order = %s\nGET = %s; want the same answer", again.body, shown.body)
	}
	refundedLine := "/v1/skus/truth-a/holds/" + refunded.Lines[0].HoldID
	if s := holdStatus(refundedLine); s != "released" {
		t.Errorf("GET of the refunded hold = %s, want released", s)
	}
	for _, end := range []string{"/confirm", "/cancel"} {
		if a := c.do(409, "POST", refundedLine+end, gw, ""); !strings.Contains(a.body, `"error":"hold_released"`) {
			t.Errorf("%s of the refunded hold = %s, want hold_released", end, a.body)
		}
	}
}
