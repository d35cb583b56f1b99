package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

const gwSecret, opSecret, apSecret = "client-gateway-secret", "client-operator-secret", "client-approver-secret"

// serve runs the API over st on a free port until the test ends and
// returns its base URL.
func serve(t *testing.T, st *stacktest.Stack) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, st.App, server.Config{Components: []string{server.ComponentAPI}, Listen: "127.0.0.1:0",
			DataDir: t.TempDir(), Tokens: "shop:gateway:" + gwSecret + ",olga:operator:" + opSecret + ",adam:approver:" + apSecret,
			OnListening: func(addr string) { listening <- addr }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case addr := <-listening:
		return "http://" + addr
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not listen")
	}
	return ""
}

func newClient(t *testing.T, base, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: base, Token: token, RetryWait: 50 * time.Millisecond, MaxAttempts: 20})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientSellsAndMapsErrors: the typed methods work end to end against
// a real serve, and the API's refusals match the domain's sentinels.
func TestClientSellsAndMapsErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t)
	base := serve(t, st)
	op, gw, ap := newClient(t, base, opSecret), newClient(t, base, gwSecret), newClient(t, base, apSecret)

	if _, created, err := op.CreateSKU(ctx, "c-1", 2, 1); err != nil || !created {
		t.Fatalf("CreateSKU = %v, %v", created, err)
	}
	if _, created, err := op.CreateSKU(ctx, "c-1", 2, 1); err != nil || created {
		t.Fatalf("CreateSKU again = %v, %v; want the same definition, not created", created, err)
	}
	if _, err := op.Warm(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	rc, err := gw.Deduct(ctx, "c-1", "u1", 1, "r1")
	if err != nil || rc.Seq != 2 || rc.Remaining != 1 || rc.Replayed {
		t.Fatalf("Deduct = %+v, %v", rc, err)
	}
	again, err := gw.Deduct(ctx, "c-1", "u1", 1, "r1")
	if err != nil || !again.Replayed || again.EventID != rc.EventID {
		t.Fatalf("Deduct replayed = %+v, %v; want the original, replayed", again, err)
	}
	if _, err := gw.Deduct(ctx, "c-1", "u1", 1, "r2"); !errors.Is(err, domain.ErrAlreadyPurchased) {
		t.Fatalf("second purchase = %v, want ErrAlreadyPurchased", err)
	}
	if _, err := gw.Deduct(ctx, "c-1", "u2", 0, "r3"); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("qty 0 = %v, want ErrInvalidInput", err)
	} else if e := (*client.Error)(nil); !errors.As(err, &e) || e.Field != "qty" || e.TraceID == "" {
		t.Fatalf("qty 0 = %#v, want field qty and a trace id", err)
	}
	if _, err := gw.Deduct(ctx, "c-1", "u2", 1, "r4"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Deduct(ctx, "c-1", "u3", 1, "r5"); !errors.Is(err, domain.ErrSoldOut) {
		t.Fatalf("third buyer = %v, want ErrSoldOut", err)
	}
	if rr, err := gw.Release(ctx, "c-1", "u1", "r1", "payment timeout"); err != nil || rr.AlreadyReleased {
		t.Fatalf("Release = %+v, %v", rr, err)
	}
	var e *client.Error
	if _, err := gw.SKU(ctx, "c-1"); !errors.As(err, &e) || e.Status != 403 {
		t.Fatalf("a gateway reading the SKU view = %v, want 403", err)
	}
	if _, err := op.SKU(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown SKU = %v, want ErrNotFound", err)
	}

	adj, err := op.RequestAdjustment(ctx, "c-1", 3, "found a box")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.ApproveAdjustment(ctx, adj.ID); err == nil {
		t.Fatal("an operator approved an adjustment")
	}
	if got, err := ap.ApproveAdjustment(ctx, adj.ID); err != nil || got.Status != "applied" {
		t.Fatalf("ApproveAdjustment = %+v, %v", got, err)
	}
	second, err := op.RequestAdjustment(ctx, "c-1", -1, "miscounted")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ap.RejectAdjustment(ctx, second.ID); err != nil || got.Status != "rejected" || got.DecidedBy == nil || *got.DecidedBy != "adam" {
		t.Fatalf("RejectAdjustment = %+v, %v", got, err)
	}
	if _, err := ap.RejectAdjustment(ctx, adj.ID); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("RejectAdjustment of an applied adjustment = %v, want ErrConflict", err)
	}
	if page, err := op.Adjustments(ctx, "applied", "c-1", 0, 10); err != nil || len(page.Adjustments) != 1 || page.Adjustments[0].ID != adj.ID {
		t.Fatalf("Adjustments = %+v, %v", page, err)
	}
	if page, err := op.Adjustments(ctx, "", "c-1", 0, 10); err != nil || len(page.Adjustments) != 2 || page.Adjustments[0].ID != second.ID {
		t.Fatalf("Adjustments, newest first = %+v, %v", page, err)
	}
	// Do reaches a route by its path, decoding the answer like the typed
	// methods do.
	var view wire.SKUViewJSON
	if err := op.Do(ctx, http.MethodGet, "/v1/skus/c-1", nil, &view); err != nil || view.InitialStock != 2 || view.State != "open" {
		t.Fatalf("Do GET /v1/skus/c-1 = %+v, %v", view, err)
	}
	if err := op.Do(ctx, http.MethodPost, "/v1/adjustments", wire.AdjustmentBody{SKU: "c-1"}, nil); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("Do with no delta = %v, want ErrInvalidInput", err)
	}
	if rep, err := op.Reconcile(ctx, "c-1", false); err != nil || rep.Checked != 1 {
		t.Fatalf("Reconcile = %+v, %v", rep, err)
	}
	if _, err := op.Close(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Deduct(ctx, "c-1", "u9", 1, "r9"); !errors.Is(err, domain.ErrClosed) {
		t.Fatalf("purchase after close = %v, want ErrClosed", err)
	}
}

// TestClientRetriesThroughAStall: with Redis frozen for a second and a
// half, purchases answer 503 and the client retries them with the same
// request id until Redis is back: every purchase succeeds, exactly once.
func TestClientRetriesThroughAStall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := stacktest.New(t, stacktest.WithAppConfig(func(c *app.Config) { c.RedisTimeout = 300 * time.Millisecond }))
	st.SKU(t, "stall-1", 100, 1)
	base := serve(t, st)
	gw := newClient(t, base, gwSecret)

	if err := st.Redis.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := time.AfterFunc(1500*time.Millisecond, func() { _ = st.Redis.Resume() })
	t.Cleanup(func() { resumed.Stop(); _ = st.Redis.Resume() })
	var wg sync.WaitGroup
	receipts := make([]client.Receipt, 20)
	errs := make([]error, 20)
	for i := range receipts {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			receipts[i], errs[i] = gw.Deduct(ctx, "stall-1", "u"+string(rune('a'+i)), 1, "stall-r"+string(rune('a'+i)))
		})
	}
	wg.Wait()
	seqs := map[int64]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("purchase %d through the stall: %v", i, err)
		}
		seqs[receipts[i].Seq] = true
	}
	v, err := newClient(t, base, opSecret).Warm(ctx, "stall-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 20 || v.Stock != 80 || v.Seq != 21 {
		t.Fatalf("after the stall: %d distinct seqs, stock %d, seq %d; want 20 purchases, each once", len(seqs), v.Stock, v.Seq)
	}
	// The purchases did meet the stall: the API answered 503s, which the
	// client retried.
	if n := testutil.ToFloat64(st.App.Metrics.Unavailable.WithLabelValues("POST /v1/skus/{sku}/deduct", "unavailable")); n == 0 {
		t.Fatal("no purchase was answered 503 during the stall: the test did not test retries")
	}
}

// TestConfigValidate names every bad setting.
func TestConfigValidate(t *testing.T) {
	_, err := client.New(client.Config{BaseURL: "ftp://x", MaxAttempts: -1})
	for _, want := range []string{"BaseURL", "Token", "MaxAttempts"} {
		if err == nil || !errors.Is(err, domain.ErrInvalidInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("New(bad) = %v, want it to name %s", err, want)
		}
	}
}

// TestClientManagesWebhooks creates, lists, rotates and deletes a
// business-event webhook through the client against a real serve.
func TestClientManagesWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	op := newClient(t, serve(t, stacktest.New(t)), opSecret)
	hook, err := op.CreateWebhook(ctx, "http://127.0.0.1:9/hooks", []string{"sold_out", "closed"})
	if err != nil || hook.ID == "" || !strings.HasPrefix(hook.Secret, "whsec_") || hook.CreatedBy != "olga" {
		t.Fatalf("create: %+v %v", hook, err)
	}
	var fe *client.Error
	if _, err := op.CreateWebhook(ctx, "http://127.0.0.1:9/hooks", []string{"stocked"}); !errors.As(err, &fe) || fe.Field != "event_types" {
		t.Fatalf("create with an unknown type: %v, want a 400 naming event_types", err)
	}
	list, err := op.Webhooks(ctx)
	if err != nil || len(list.Webhooks) != 1 || list.Webhooks[0].ID != hook.ID || list.Webhooks[0].Secret != "" {
		t.Fatalf("list: %+v %v, want the one webhook without its secret", list, err)
	}
	rotated, err := op.RotateWebhook(ctx, hook.ID)
	if err != nil || rotated.Secret == hook.Secret || rotated.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotate: %+v %v", rotated, err)
	}
	if err := op.DeleteWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	if err := op.DeleteWebhook(ctx, hook.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", err)
	}
}
