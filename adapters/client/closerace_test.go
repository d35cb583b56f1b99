package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"

	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
)

// TestPurchasesSurviveAKeepAliveClose: a keep-alive connection closed just
// as a purchase is written on it, as the API closes an idle one to admit
// another when it is full, costs the caller nothing even with a single
// attempt: the client sends every purchase, reserve, order and release
// with its key as Idempotency-Key, so Go's transport sends it again on a
// fresh connection. A proxy in front of a real serve closes every
// connection at its second request, unanswered.
func TestPurchasesSurviveAKeepAliveClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	st.SKU(t, "c-race", 10, 4)
	api, err := url.Parse(serve(t, st))
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(api)
	var (
		mu      sync.Mutex
		seen    = map[string]int{} // requests per client connection
		dropped []string
	)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.RemoteAddr]++
		second := seen[r.RemoteAddr] == 2
		if second {
			dropped = append(dropped, r.URL.Path+" key="+r.Header.Get(wire.HeaderIdempotencyKey))
		}
		mu.Unlock()
		if second {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			conn.Close()
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	gw, err := client.New(client.Config{BaseURL: front.URL, Token: gwSecret, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := gw.Deduct(ctx, "c-race", "u1", 1, "race-1"); err != nil {
		t.Fatalf("first purchase: %v", err)
	}
	if _, err := gw.Deduct(ctx, "c-race", "u1", 1, "race-2"); err != nil {
		t.Fatalf("a purchase whose connection was closed as it was written: %v", err)
	}
	if _, err := gw.Reserve(ctx, "c-race", "u1", 1, "race-3", 60); err != nil {
		t.Fatalf("a reserve whose connection was closed as it was written: %v", err)
	}
	if _, err := gw.PlaceOrder(ctx, "race-order", "u1", 60, []wire.OrderLineBody{{SKU: "c-race", Qty: 1}}); err != nil {
		t.Fatalf("an order whose connection was closed as it was written: %v", err)
	}
	if _, err := gw.Release(ctx, "c-race", "u1", "race-1", "test"); err != nil {
		t.Fatalf("a release whose connection was closed as it was written: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/v1/skus/c-race/deduct key=race-2", "/v1/skus/c-race/holds key=race-3",
		"/v1/orders key=race-order", "/v1/skus/c-race/release key=race-1"}
	if len(dropped) != len(want) {
		t.Fatalf("requests dropped unanswered: %q, want %q", dropped, want)
	}
	for i := range want {
		if dropped[i] != want[i] {
			t.Fatalf("requests dropped unanswered: %q, want %q", dropped, want)
		}
	}
}
