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

func (s *memStore) EventsAfterEach(ctx context.Context, reads []Read) ([][]domain.Event, error) {
	out := make([][]domain.Event, len(reads))
	for i, r := range reads {
		out[i], _ = s.EventsAfter(ctx, r.SKU, r.After, r.Limit)
	}
	return out, nil
}

func (s *memStore) AdvanceCursors(_ context.Context, _ string, to map[string]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cursor = max(s.cursor, to["s"])
	s.advances = append(s.advances, to["s"])
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
func (p *flakyPublisher) Down() error                   { return nil }
func (p *flakyPublisher) Close() error                  { return nil }
func (p *flakyPublisher) HeldBeyondLedger(sku string, seq int64) error {
	return &SettingError{Setting: SettingNATSStream, Err: fmt.Errorf("holds %s up to %d", sku, seq)}
}
func (p *flakyPublisher) Replay(context.Context, []Message) error {
	return errors.New("not used")
}

func (p *flakyPublisher) Path() string   { return "per_sku" }
func (p *flakyPublisher) Limits() Limits { return Limits{Events: 256, PerSKU: 256} }

func (p *flakyPublisher) Publish(_ context.Context, runs []Run) []Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Outcome, len(runs))
	for i, r := range runs {
		out[i].UpTo = r.After
		for _, m := range r.Msgs {
			if m.Seq == p.failAt {
				p.failAt = 0
				out[i].Err = &SettingError{Setting: SettingNATSStream, Err: errors.New("refused once")}
				break
			}
			p.confirmed = append(p.confirmed, m.Seq)
			out[i].UpTo = m.Seq
		}
	}
	return out
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
	e, err := New(Config{Store: store, Publisher: pub, Poll: time.Millisecond, MinBackoff: time.Millisecond,
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
