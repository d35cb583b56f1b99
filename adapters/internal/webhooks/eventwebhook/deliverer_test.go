package eventwebhook_test

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/invledger/invledger/adapters/internal/webhooks/eventwebhook"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// memStore is the Store port in memory: which events the ledger holds and
// where each subscription's cursors stand. The PostgreSQL store is
// exercised with real deliveries in server's webhook tests.
type memStore struct {
	mu      sync.Mutex
	subs    []domain.WebhookSubscription
	events  map[string][]domain.Event // by SKU, seqs 1, 2, ...
	cursors map[[2]string]int64       // (webhook, sku) -> seq
	history map[[2]string][]int64     // every AdvanceCursor, in order
}

func (m *memStore) Webhooks(context.Context) ([]domain.WebhookSubscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.subs), nil
}

func (m *memStore) PendingSKUs(_ context.Context, id string) ([]ledger.WebhookCursor, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ledger.WebhookCursor
	for _, sku := range slices.Sorted(maps.Keys(m.events)) {
		if c := m.cursors[[2]string{id, sku}]; int64(len(m.events[sku])) > c {
			out = append(out, ledger.WebhookCursor{SKU: sku, Seq: c})
		}
	}
	return out, nil
}

func (m *memStore) EventsAfter(_ context.Context, sku string, seq int64, limit int) ([]domain.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := m.events[sku][min(seq, int64(len(m.events[sku]))):]
	return slices.Clone(evs[:min(limit, len(evs))]), nil
}

func (m *memStore) AdvanceCursor(_ context.Context, id, sku string, seq int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{id, sku}
	m.cursors[k] = seq
	m.history[k] = append(m.history[k], seq)
	return nil
}

func (m *memStore) cursor(id, sku string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursors[[2]string{id, sku}]
}

// received is one request that reached the receiver.
type received struct {
	sub, id string
	body    []byte
	status  int
	err     error // the signature check's
}

// receiver answers 503 to the first attempt of failOnce, 204 otherwise,
// and keeps every request with its signature checked.
type receiver struct {
	mu       sync.Mutex
	verifier *standardwebhooks.Webhook
	failOnce string
	failed   bool
	got      []received
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := received{sub: strings.TrimPrefix(req.URL.Path, "/"), id: req.Header.Get(standardwebhooks.HeaderWebhookID), body: body,
		status: http.StatusNoContent, err: r.verifier.Verify(body, req.Header)}
	if rec.id == r.failOnce && !r.failed {
		r.failed, rec.status = true, http.StatusServiceUnavailable
	}
	r.got = append(r.got, rec)
	w.WriteHeader(rec.status)
}

// delivered returns the message ids sub received with a 2xx, in order.
func (r *receiver) delivered(sub string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, g := range r.got {
		if g.sub == sub && g.status/100 == 2 {
			out = append(out, g.id)
		}
	}
	return out
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestDeliversInSeqOrderWithCursorsAndRetries: each subscription gets the
// messages of the types it wants, each SKU's in seq order (an event's own
// type, then sold_out), signed with its secret; a failed attempt is
// retried, after the cursor recorded what was delivered before it; the
// cursors end at each SKU's last seq, also for the events nobody wanted.
func TestDeliversInSeqOrderWithCursorsAndRetries(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 0, 0, 0, time.FixedZone("CET", 3600))
	expires := at.Add(10 * time.Minute)
	ev := func(sku string, seq int64, typ domain.EventType, delta, balance int64) domain.Event {
		e := domain.Event{ID: sku + "-" + string(rune('0'+seq)), Type: typ, SKU: sku, Seq: seq, Qty: max(-delta, 0), Delta: delta,
			Balance: balance, User: "u" + string(rune('0'+seq)), RequestID: "r" + string(rune('0'+seq)), OccurredAt: at.Add(time.Duration(seq) * time.Second)}
		if typ == domain.EventReserved {
			e.HoldID, e.ExpiresAt = "h1", expires
		}
		return e
	}
	store := &memStore{cursors: map[[2]string]int64{}, history: map[[2]string][]int64{}, events: map[string][]domain.Event{
		"a": {ev("a", 1, domain.EventStocked, 3, 3), ev("a", 2, domain.EventDeducted, -1, 2), ev("a", 3, domain.EventReserved, -1, 1),
			ev("a", 4, domain.EventDeducted, -1, 0)},
		"b": {ev("b", 1, domain.EventStocked, 5, 5), ev("b", 2, domain.EventDeducted, -2, 3)},
	}}
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	recv := &receiver{verifier: verifier, failOnce: "evt_a-4"}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	store.subs = []domain.WebhookSubscription{
		{ID: "all", URL: srv.URL + "/all", EventTypes: domain.WebhookEventTypes, Secret: secret},
		{ID: "soldout", URL: srv.URL + "/soldout", EventTypes: []string{domain.WebhookSoldOut}, Secret: secret},
	}

	d, err := eventwebhook.New(eventwebhook.Config{Store: store, Client: srv.Client(), Poll: 10 * time.Millisecond,
		Batch: 2, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Metrics: eventwebhook.NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for !(store.cursor("all", "a") == 4 && store.cursor("all", "b") == 2 && store.cursor("soldout", "a") == 4 && store.cursor("soldout", "b") == 2) {
		if time.Now().After(deadline) {
			t.Fatalf("cursors after 20s: %v; received %v and %v", store.cursors, recv.delivered("all"), recv.delivered("soldout"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}

	bySKU := func(ids []string, sku string) []string {
		return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !strings.HasPrefix(id, "evt_"+sku+"-") })
	}
	all := recv.delivered("all")
	if got, want := bySKU(all, "a"), []string{"evt_a-2", "evt_a-3", "evt_a-4", "evt_a-4_sold_out"}; !slices.Equal(got, want) {
		t.Errorf("subscription all, SKU a: %v, want %v", got, want)
	}
	if got, want := bySKU(all, "b"), []string{"evt_b-2"}; !slices.Equal(got, want) {
		t.Errorf("subscription all, SKU b: %v, want %v", got, want)
	}
	if got, want := recv.delivered("soldout"), []string{"evt_a-4_sold_out"}; !slices.Equal(got, want) {
		t.Errorf("subscription soldout: %v, want %v", got, want)
	}
	if got, want := store.history[[2]string{"all", "a"}], []int64{2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("cursor of all on a moved %v, want %v: a batch, the delivered seq before the retry's wait, the end", got, want)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	attempts := 0
	for _, g := range recv.got {
		if g.err != nil {
			t.Errorf("%s to %s: signature does not verify: %v", g.id, g.sub, g.err)
		}
		if g.id == "evt_a-4" && g.sub == "all" {
			attempts++
		}
	}
	if attempts != 2 {
		t.Errorf("evt_a-4 was attempted %d times, want 2 (a 503, then the retry)", attempts)
	}
	payloads := map[string]map[string]any{}
	for _, g := range recv.got {
		var p map[string]any
		if err := json.Unmarshal(g.body, &p); err != nil {
			t.Fatalf("%s: %v: %s", g.id, err, g.body)
		}
		payloads[g.sub+" "+g.id] = p
	}
	checkPayload(t, payloads["all evt_a-3"], "reserved", at.Add(3*time.Second), map[string]any{
		"event_id": "a-3", "type": "reserved", "sku": "a", "seq": 3.0, "qty": 1.0, "delta": -1.0, "balance_after": 1.0, "balance": 1.0,
		"user_id": "u3", "request_id": "r3", "actor": "", "reason": "", "occurred_at": "2026-12-02T15:00:03Z",
		"hold_id": "h1", "expires_at": "2026-12-02T15:10:00Z"})
	checkPayload(t, payloads["soldout evt_a-4_sold_out"], "sold_out", at.Add(4*time.Second), map[string]any{
		"event_id": "a-4", "type": "deducted", "sku": "a", "seq": 4.0, "qty": 1.0, "delta": -1.0, "balance_after": 0.0, "balance": 0.0,
		"user_id": "u4", "request_id": "r4", "actor": "", "reason": "", "occurred_at": "2026-12-02T15:00:04Z"})
}

// checkPayload fails unless p is a Standard Webhooks payload of type typ,
// timestamped with the event's time in UTC, whose data is exactly data:
// the API's event JSON, with no hold fields on an event of no hold, and
// balance beside balance_after for the release that keeps 1.0.0's name.
func checkPayload(t *testing.T, p map[string]any, typ string, at time.Time, data map[string]any) {
	t.Helper()
	if p == nil {
		t.Errorf("no %s payload was received", typ)
		return
	}
	if p["type"] != typ || p["timestamp"] != at.UTC().Format(time.RFC3339) || len(p) != 3 {
		t.Errorf("payload %v: want type %s, timestamp %s, data", p, typ, at.UTC().Format(time.RFC3339))
	}
	got, _ := p["data"].(map[string]any)
	if !maps.Equal(got, data) {
		t.Errorf("%s data:\n got %v\nwant %v", typ, got, data)
	}
}

// TestConfigRefusesWhatCannotDeliver: New names every missing or invalid
// setting at once.
func TestConfigRefusesWhatCannotDeliver(t *testing.T) {
	_, err := eventwebhook.New(eventwebhook.Config{Workers: -1})
	for _, want := range []string{"Store is required", "Metrics is required", "Workers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v, want it to say %q", err, want)
		}
	}
}
