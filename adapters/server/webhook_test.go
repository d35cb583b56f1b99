package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/webhooks/eventwebhook"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// webhookReceiver is a real HTTP receiver of business-event webhooks: it
// verifies every signature with the Standard Webhooks library, keeps the
// first copy of each webhook-id, and can fail half its requests or be
// down altogether.
type webhookReceiver struct {
	addr     string
	verifier atomic.Pointer[standardwebhooks.Webhook]
	failHalf atomic.Bool

	mu       sync.Mutex
	srv      *http.Server
	got      map[string]eventwebhook.Payload // webhook-id → first copy
	bodies   map[string][]byte               // webhook-id → first copy, as sent
	arrivals map[string][]int64              // sku → seqs of first copies, in arrival order
	requests int
	refused  int // failed on purpose
	repeats  int
	badSigs  int
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	t.Helper()
	r := &webhookReceiver{got: map[string]eventwebhook.Payload{}, bodies: map[string][]byte{}, arrivals: map[string][]int64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *webhookReceiver) serve(ln net.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(ln) }(r.srv)
}

// down closes the listener and every connection: deliveries fail to connect.
func (r *webhookReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	_ = srv.Close()
}

// up listens again on the same address.
func (r *webhookReceiver) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatalf("receiver cannot listen again on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *webhookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failHalf.Load() && rand.IntN(2) == 0 {
		r.refused++
		http.Error(w, "failing on purpose", http.StatusInternalServerError)
		return
	}
	r.requests++
	if err := r.verifier.Load().Verify(body, req.Header); err != nil {
		r.badSigs++
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := req.Header.Get(standardwebhooks.HeaderWebhookID)
	if _, seen := r.got[id]; seen {
		r.repeats++
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var p eventwebhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		r.badSigs++ // a signed body that does not decode is as bad
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.got[id] = p
	r.bodies[id] = body
	if p.Type == p.Data.Type {
		r.arrivals[p.Data.SKU] = append(r.arrivals[p.Data.SKU], p.Data.Seq)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *webhookReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// waitCount waits until the receiver holds n distinct messages.
func (r *webhookReceiver) waitCount(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for r.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver holds %d messages after %s, want %d", r.count(), timeout, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEventWebhooksDeliverASaleExactlyOnceInOrder sells 5,000 units over
// four SKUs (one sells out), with releases and a close, to a subscription of every
// event type whose receiver fails half of its requests throughout. The
// serve process delivering is killed with kill -9 once 1,000 messages
// arrived and another takes over; after 2,500 the receiver is down for
// 20 s. In the end the receiver, after dropping repeats by webhook-id,
// holds exactly the messages the ledger implies, each signature verified,
// every SKU's events in seq order.
func TestEventWebhooksDeliverASaleExactlyOnceInOrder(t *testing.T) {
	ctx := ledger.WithActor(context.Background(), "olga")
	st := stacktest.New(t)
	skus := map[string]int64{"wh-a": 1250, "wh-b": 2000, "wh-c": 2000, "wh-d": 2000}
	for sku, stock := range skus {
		st.SKU(t, sku, stock, 1)
	}
	recv := newWebhookReceiver(t)
	sub, err := st.App.Webhooks.Create(ctx, "http://"+recv.addr+"/hooks", domain.WebhookEventTypes)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := standardwebhooks.NewWebhook(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	recv.verifier.Store(verifier)
	recv.failHalf.Store(true)

	first := startServeProcess(t, st, time.Minute, ComponentProjector)

	// The sale: 1,250 purchases per SKU from 40 callers, then 10 releases.
	const purchases, callers = 5000, 40
	saleDone := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for c := range callers {
			wg.Go(func() {
				for i := c; i < purchases; i += callers {
					sku := []string{"wh-a", "wh-b", "wh-c", "wh-d"}[i%4]
					cmd, err := ledger.NewDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i))
					if err == nil {
						_, err = st.Service.Deduct(ctx, cmd)
					}
					if err != nil {
						errs <- fmt.Errorf("purchase %d of %s: %w", i, sku, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		saleErr := errors.Join(<-errs)
		for i := 0; saleErr == nil && i < 10; i++ {
			sku := []string{"wh-a", "wh-b", "wh-c", "wh-d"}[i%4]
			cmd, err := ledger.NewReleaseCommand(sku, fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i), "payment failed")
			if err == nil {
				_, err = st.Service.Release(ctx, cmd)
			}
			saleErr = err
		}
		if saleErr == nil {
			_, saleErr = st.App.Archiver.CloseSKU(ctx, "wh-b")
		}
		saleDone <- saleErr
	}()

	recv.waitCount(t, 1000, 60*time.Second)
	first.kill()
	startServeProcess(t, st, time.Minute, ComponentProjector)
	recv.waitCount(t, 2500, 60*time.Second)
	recv.down()
	time.Sleep(20 * time.Second)
	recv.up(t)
	if err := <-saleDone; err != nil {
		t.Fatal(err)
	}

	// What the ledger implies, once it holds the whole sale.
	want := map[string]domain.Event{}
	order := map[string][]int64{}
	for sku := range skus {
		st.WaitProjected(t, sku, 60*time.Second)
	}
	if err := approot.Of(st.App).Adapters.Ledger.ScanAll(context.Background(), func(e domain.Event) error {
		for _, m := range domain.WebhookMessages(e) {
			want[m.ID] = e
			if m.Type == string(e.Type) {
				order[e.SKU] = append(order[e.SKU], e.Seq)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := len(want); n != purchases+10+2 { // the purchases, the releases, wh-a's sold_out and wh-b's closed
		t.Fatalf("the ledger implies %d messages, want %d", n, purchases+12)
	}
	recv.waitCount(t, len(want), 90*time.Second)
	time.Sleep(time.Second) // anything extra would arrive now

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if recv.badSigs != 0 {
		t.Errorf("%d deliveries failed signature verification", recv.badSigs)
	}
	if len(recv.got) != len(want) {
		t.Errorf("the receiver holds %d distinct messages, the ledger implies %d", len(recv.got), len(want))
	}
	for id, p := range recv.got {
		e, ok := want[id]
		if !ok {
			t.Errorf("message %s (%s) is not implied by the ledger", id, p.Type)
			continue
		}
		if p.Data.EventID != e.ID || p.Data.SKU != e.SKU || p.Data.Seq != e.Seq || p.Data.Type != string(e.Type) || p.Data.Balance != e.Balance {
			t.Errorf("message %s carries %+v, the ledger holds %+v", id, p.Data, e)
		}
	}
	for sku, seqs := range order {
		got := recv.arrivals[sku]
		if fmt.Sprint(got) != fmt.Sprint(seqs) {
			t.Errorf("%s: events arrived in seq order %v…, the ledger's is %v…", sku, head(got), head(seqs))
		}
	}
	if recv.refused < len(want)/4 {
		t.Errorf("the receiver refused only %d of the requests for %d messages", recv.refused, len(want))
	}
	t.Logf("%d messages; %d requests verified, %d refused on purpose, %d repeats dropped by webhook-id",
		len(recv.got), recv.requests, recv.refused, recv.repeats)
}

// head is the first few of s, for a readable failure.
func head(s []int64) []int64 { return s[:min(len(s), 20)] }
