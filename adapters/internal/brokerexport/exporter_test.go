package brokerexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// memStore is a ledger of one SKU with a gap after seq gapAfter (0: none)
// and the cursors of the exporter; pure logic, no database.
type memStore struct {
	mu       sync.Mutex
	events   []domain.Event
	gapAfter int64
	cursor   int64
	advances []int64
}

func (s *memStore) Pending(context.Context, string) ([]Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := int64(len(s.events))
	if last <= s.cursor {
		return nil, nil
	}
	return []Cursor{{SKU: "s", Seq: s.cursor, LastSeq: last, Next: s.events[s.cursor].OccurredAt}}, nil
}

func (s *memStore) EventsAfter(_ context.Context, _ string, seq int64, limit int) ([]domain.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []domain.Event
	for _, e := range s.events[seq:] {
		if len(out) == limit || (s.gapAfter > 0 && e.Seq == s.gapAfter+1) {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *memStore) AdvanceCursor(_ context.Context, _, _ string, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = max(s.cursor, seq)
	s.advances = append(s.advances, seq)
	return nil
}

// flakyPublisher confirms messages in order, refusing the one at failAt
// once, and records what it confirmed.
type flakyPublisher struct {
	mu        sync.Mutex
	failAt    int64
	confirmed []int64
}

func (p *flakyPublisher) Broker() string                { return "nats" }
func (p *flakyPublisher) Connect(context.Context) error { return nil }
func (p *flakyPublisher) Close() error                  { return nil }
func (p *flakyPublisher) HeldBeyondLedger(sku string, seq int64) error {
	return &SettingError{Setting: SettingNATSStream, Err: fmt.Errorf("holds %s up to %d", sku, seq)}
}
func (p *flakyPublisher) Replay(context.Context, []Message) error {
	return errors.New("not used")
}

func (p *flakyPublisher) Publish(_ context.Context, _ string, after int64, msgs []Message) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	upTo := after
	for _, m := range msgs {
		if m.Seq == p.failAt {
			p.failAt = 0
			return upTo, &SettingError{Setting: SettingNATSStream, Err: errors.New("refused once")}
		}
		p.confirmed = append(p.confirmed, m.Seq)
		upTo = m.Seq
	}
	return upTo, nil
}

func sale(n int) []domain.Event {
	out := make([]domain.Event, n)
	for i := range out {
		out[i] = domain.Event{ID: fmt.Sprintf("e%d", i+1), SKU: "s", Seq: int64(i + 1), Type: domain.EventDeducted, OccurredAt: time.Now()}
	}
	return out
}

func runUntil(t *testing.T, e *Exporter, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestAFailureMidBatchKeepsTheConfirmedPartAndOrder: a publish refused in
// the middle of a batch records the cursor at the part confirmed before
// it, and the export resumes there: every event confirmed once, in order,
// and the failure reported until a round succeeds.
func TestAFailureMidBatchKeepsTheConfirmedPartAndOrder(t *testing.T) {
	store := &memStore{events: sale(700)}
	pub := &flakyPublisher{failAt: 300}
	e, err := New(Config{Store: store, Publisher: pub, Batch: 256, Poll: time.Millisecond, MinBackoff: time.Millisecond,
		MaxBackoff: 2 * time.Millisecond, Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, e, func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.cursor == 700 && e.Status().Err == nil
	})
	pub.mu.Lock()
	defer pub.mu.Unlock()
	for i, seq := range pub.confirmed {
		if seq != int64(i+1) {
			t.Fatalf("confirmed %d at position %d: %v", seq, i, pub.confirmed[max(0, i-3):min(len(pub.confirmed), i+3)])
		}
	}
	if len(pub.confirmed) != 700 {
		t.Fatalf("%d confirmations for 700 events", len(pub.confirmed))
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if !slices.Contains(store.advances, 299) {
		t.Fatalf("the cursor never stopped at 299, the part confirmed before the refusal: %v", store.advances)
	}
}

// TestAGapHoldsBackTheSKU: an event still on its way to the ledger (a
// gap after seq 40) holds back the later events of its SKU.
func TestAGapHoldsBackTheSKU(t *testing.T) {
	store := &memStore{events: sale(100), gapAfter: 40}
	pub := &flakyPublisher{}
	e, err := New(Config{Store: store, Publisher: pub, Poll: time.Millisecond, Metrics: NewMetrics(prometheus.NewRegistry()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntil(t, e, func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.cursor == 40 && e.Status().LagEvents == 60
	})
	store.mu.Lock()
	store.gapAfter = 0 // the event arrived
	store.mu.Unlock()
	runUntil(t, e, func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.cursor == 100
	})
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if len(pub.confirmed) != 100 || pub.confirmed[40] != 41 {
		t.Fatalf("confirmed %d events, the 41st being seq %d", len(pub.confirmed), pub.confirmed[40])
	}
}
