package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/invledger/invledger/adapters/driven/eventtail"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// figure is one second of a watched SKU, as the live chart plots it.
type figure struct {
	T           int64   `json:"t"` // Unix seconds
	Stock       *int64  `json:"stock"`
	LedgerStock *int64  `json:"ledger_stock"`
	RedisSeq    *int64  `json:"redis_seq"`
	LedgerSeq   *int64  `json:"ledger_seq"`
	LagEvents   int64   `json:"lag_events"`
	LagSeconds  float64 `json:"lag_seconds"`
	PerSecond   int64   `json:"purchases_per_s"`
	State       string  `json:"state"`
	// Refusals are the SKU's refused purchases by reason, in every
	// process; absent when they could not be read.
	Refusals map[string]int64 `json:"refusals,omitempty"`
}

// historyLen is how many seconds of figures a watched SKU keeps for a
// watcher that joins later.
const historyLen = 300

// subscriberBuffer is how many messages a slow watcher may fall behind
// before it misses some: the reader never waits for a watcher.
const subscriberBuffer = 512

type feedMsg struct {
	kind string
	data []byte
}

// hub is the fan-out reader: one tail of the partition stream per watched
// SKU, however many browsers watch it, started with the first watcher and
// stopped with the last. It reads with a plain XREAD on its own connection,
// so purchases neither wait for it nor share its reads.
type hub struct {
	follow   func(ctx context.Context, sku string, fn func(domain.Event) error) error
	state    func(ctx context.Context, sku string) (ledger.SKUView, error)
	refusals func(ctx context.Context, sku string) (map[string]int64, error)
	log      *slog.Logger

	mu     sync.Mutex
	closed bool
	skus   map[string]*watch
}

type watch struct {
	cancel  context.CancelFunc
	subs    map[chan feedMsg]struct{}
	history []figure
	// Guarded by hub.mu, fed by the tail.
	purchases int64
	pending   []seqTime // events the ledger had not projected when last looked
}

type seqTime struct {
	seq int64
	at  time.Time
}

func newHub(cfg Config) *hub {
	return &hub{follow: cfg.Follow, state: cfg.State, refusals: cfg.Refusals, log: cfg.Logger, skus: map[string]*watch{}}
}

// subscribe adds a watcher of sku; it gets the recent figures at once,
// then every message on ch until unsubscribe or the hub closes (ch closed).
func (h *hub) subscribe(sku string) (ch chan feedMsg, recent []figure, unsubscribe func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, nil, false
	}
	w := h.skus[sku]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &watch{cancel: cancel, subs: map[chan feedMsg]struct{}{}}
		h.skus[sku] = w
		go h.tail(ctx, sku, w)
		go h.tick(ctx, sku, w)
	}
	ch = make(chan feedMsg, subscriberBuffer)
	w.subs[ch] = struct{}{}
	recent = append([]figure(nil), w.history...)
	return ch, recent, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, still := w.subs[ch]; !still {
			return
		}
		delete(w.subs, ch)
		if len(w.subs) == 0 {
			w.cancel()
			delete(h.skus, sku)
		}
	}, true
}

// broadcast hands m to every watcher of w that has room; one that has
// none misses it rather than slowing the others or the reader.
func (h *hub) broadcast(w *watch, m feedMsg) {
	for ch := range w.subs {
		select {
		case ch <- m:
		default:
		}
	}
}

// tail follows sku's events until ctx ends, again after a second when the
// stream read fails (Redis restarting, failing over).
func (h *hub) tail(ctx context.Context, sku string, w *watch) {
	for ctx.Err() == nil {
		err := h.follow(ctx, sku, func(e domain.Event) error {
			b, err := json.Marshal(eventtail.NewEventJSON(e))
			if err != nil {
				return err
			}
			h.mu.Lock()
			if e.Type == domain.EventDeducted {
				w.purchases++
			}
			w.pending = append(w.pending, seqTime{e.Seq, e.OccurredAt})
			h.broadcast(w, feedMsg{"event", b})
			h.mu.Unlock()
			return nil
		})
		if err != nil && ctx.Err() == nil {
			h.log.Warn("console: live tail stopped; following again in 1s", "sku", sku, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// tick reads sku's figures once a second and sends them to the watchers.
func (h *hub) tick(ctx context.Context, sku string, w *watch) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			rctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
			v, err := h.state(rctx, sku)
			// Refusals are a nicety: the figures go out without them.
			refused, _ := h.refusals(rctx, sku)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					h.log.Debug("console: figures unavailable", "sku", sku, "err", err)
				}
				continue
			}
			f := figure{T: now.Unix(), Stock: v.RedisStock, LedgerStock: v.LedgerStock, RedisSeq: v.RedisSeq, LedgerSeq: v.LedgerSeq, State: string(v.Status),
				Refusals: refused}
			if v.RedisSeq != nil && v.LedgerSeq != nil {
				f.LagEvents = max(0, *v.RedisSeq-*v.LedgerSeq)
			}
			h.mu.Lock()
			f.PerSecond, w.purchases = w.purchases, 0
			i := 0
			for i < len(w.pending) && v.LedgerSeq != nil && w.pending[i].seq <= *v.LedgerSeq {
				i++
			}
			w.pending = w.pending[i:]
			if f.LagEvents > 0 && len(w.pending) > 0 {
				f.LagSeconds = now.Sub(w.pending[0].at).Seconds()
			}
			w.history = append(w.history, f)
			if len(w.history) > historyLen {
				w.history = w.history[len(w.history)-historyLen:]
			}
			b, _ := json.Marshal(f)
			h.broadcast(w, feedMsg{"figures", b})
			h.mu.Unlock()
		}
	}
}

// close stops every tail and ends every feed.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sku, w := range h.skus {
		w.cancel()
		for ch := range w.subs {
			close(ch)
		}
		w.subs = nil
		delete(h.skus, sku)
	}
}

// keepAlive is how often an idle feed sends a comment, and re-checks that
// its session still stands.
const keepAlive = 10 * time.Second

// feed is GET /console/skus/{sku}/feed: Server-Sent Events, "figures" once
// a second and "event" for each event of the SKU. It is exempt from the
// server's write timeout and, being a connection, counts against serve's
// connection cap. It ends when the session does.
func (c *Console) feed(w http.ResponseWriter, r *http.Request, s session) {
	sku := r.PathValue("sku")
	if _, err := domain.NewSKUID(sku); err != nil {
		http.Error(w, "sku: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := c.cfg.LiftDeadlines(w); err != nil {
		c.fail(w, r, s, fmt.Errorf("feed: lift the deadlines: %w", err))
		return
	}
	ch, recent, unsubscribe, ok := c.hub.subscribe(sku)
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer unsubscribe()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	b, _ := json.Marshal(recent)
	if err := writeEvent(w, rc, "history", b); err != nil {
		return
	}
	alive := time.NewTicker(keepAlive)
	defer alive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case m, open := <-ch:
			// Everything already queued goes out in one flush: at sale
			// rates a flush per event would leave the watcher behind.
			for open {
				if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", m.kind, m.data); err != nil {
					return
				}
				select {
				case m, open = <-ch:
					continue
				default:
				}
				break
			}
			if !open || rc.Flush() != nil {
				return
			}
		case <-alive.C:
			if _, err := c.readSession(r); err != nil {
				_ = writeEvent(w, rc, "signedout", []byte("{}"))
				return
			}
			if _, err := w.Write([]byte(": alive\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

func writeEvent(w http.ResponseWriter, rc *http.ResponseController, kind string, data []byte) error {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", kind, data); err != nil {
		return err
	}
	return rc.Flush()
}
