package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/invledger/invledger/adapters/internal/eventjson"
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

// hub is the fan-out reader: one tail per partition stream that has a
// watched SKU, however many SKUs of it and browsers watch, started with the
// first watcher and stopped with the last. Each tail reads with a plain
// XREAD on its own connection, so purchases neither wait for it nor share
// its reads, and the connections are bounded by the partitions, not the
// SKUs. It also caps the feeds, in all, per session and per principal.
type hub struct {
	follow    func(ctx context.Context, partition int, fn func(domain.Event) error) error
	partition func(sku string) int
	state     func(ctx context.Context, sku string) (ledger.SKUView, error)
	refusals  func(ctx context.Context, sku string) (map[string]int64, error)
	limits    FeedLimits
	log       *slog.Logger

	mu          sync.Mutex
	closed      bool
	skus        map[string]*watch
	tails       map[int]*partitionTail
	feeds       int
	bySession   map[string]int
	byPrincipal map[string]int
}

// partitionTail is the reader of one partition stream.
type partitionTail struct {
	cancel  context.CancelFunc
	watched int // SKUs of the partition with watchers
}

type watch struct {
	cancel  context.CancelFunc // stops the SKU's figures
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
	return &hub{follow: cfg.Follow, partition: cfg.Partition, state: cfg.State, refusals: cfg.Refusals, limits: cfg.FeedLimits,
		log: cfg.Logger, skus: map[string]*watch{}, tails: map[int]*partitionTail{}, bySession: map[string]int{}, byPrincipal: map[string]int{}}
}

// Why subscribe refuses a feed.
var (
	errShuttingDown  = errors.New("shutting down")
	errFeedsFull     = errors.New("the live feeds of this process are all taken")
	errSessionFeeds  = errors.New("this session has as many live feeds open as it may")
	errPrincipalFeed = errors.New("this token has as many live feeds open as it may")
)

// watcher is who opens a feed, for the caps.
type watcher struct{ session, principal string }

// subscribe adds a watcher of sku; it gets the recent figures at once,
// then every message on ch until unsubscribe or the hub closes (ch closed).
func (h *hub) subscribe(sku string, who watcher) (ch chan feedMsg, recent []figure, unsubscribe func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, nil, nil, errShuttingDown
	case h.bySession[who.session] >= h.limits.PerSession:
		return nil, nil, nil, errSessionFeeds
	case h.byPrincipal[who.principal] >= h.limits.PerPrincipal:
		return nil, nil, nil, errPrincipalFeed
	case h.feeds >= h.limits.Total:
		return nil, nil, nil, errFeedsFull
	}
	w := h.skus[sku]
	if w == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w = &watch{cancel: cancel, subs: map[chan feedMsg]struct{}{}}
		h.skus[sku] = w
		h.watchPartition(h.partition(sku))
		go h.tick(ctx, sku, w)
	}
	h.feeds++
	h.bySession[who.session]++
	h.byPrincipal[who.principal]++
	ch = make(chan feedMsg, subscriberBuffer)
	w.subs[ch] = struct{}{}
	recent = append([]figure(nil), w.history...)
	return ch, recent, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, still := w.subs[ch]; !still {
			return // the hub closed
		}
		delete(w.subs, ch)
		h.feeds--
		decrement(h.bySession, who.session)
		decrement(h.byPrincipal, who.principal)
		if len(w.subs) == 0 {
			w.cancel()
			delete(h.skus, sku)
			h.unwatchPartition(h.partition(sku))
		}
	}, nil
}

func decrement(m map[string]int, key string) {
	if m[key]--; m[key] <= 0 {
		delete(m, key)
	}
}

// watchPartition counts one more watched SKU of partition p, starting its
// tail for the first. Called with h.mu held.
func (h *hub) watchPartition(p int) {
	pt := h.tails[p]
	if pt == nil {
		ctx, cancel := context.WithCancel(context.Background())
		pt = &partitionTail{cancel: cancel}
		h.tails[p] = pt
		go h.tail(ctx, p, pt)
	}
	pt.watched++
}

// unwatchPartition counts one watched SKU of p less, stopping its tail
// after the last. Called with h.mu held.
func (h *hub) unwatchPartition(p int) {
	pt := h.tails[p]
	if pt.watched--; pt.watched == 0 {
		pt.cancel()
		delete(h.tails, p)
	}
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

// tail follows partition p's events until ctx ends, again after a second
// when the stream read fails (Redis restarting, failing over), and hands
// each to the watchers of its SKU.
func (h *hub) tail(ctx context.Context, p int, pt *partitionTail) {
	for ctx.Err() == nil {
		err := h.follow(ctx, p, func(e domain.Event) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			w := h.skus[e.SKU]
			// A tail being stopped may still read while its successor
			// runs: only the current one speaks.
			if w == nil || h.tails[p] != pt {
				return nil
			}
			b, err := json.Marshal(eventjson.New(e))
			if err != nil {
				return err
			}
			if e.Type == domain.EventDeducted {
				w.purchases++
			}
			w.pending = append(w.pending, seqTime{e.Seq, e.OccurredAt})
			h.broadcast(w, feedMsg{"event", b})
			return nil
		})
		if err != nil && ctx.Err() == nil {
			h.log.Warn("console: live tail stopped; following again in 1s", "partition", p, "err", err)
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
	for p, pt := range h.tails {
		pt.cancel()
		delete(h.tails, p)
	}
	h.feeds, h.bySession, h.byPrincipal = 0, map[string]int{}, map[string]int{}
}

// keepAlive is how often an idle feed sends a comment, and re-checks that
// its session still stands.
const keepAlive = 10 * time.Second

// feed is GET /console/skus/{sku}/feed: Server-Sent Events, "figures" once
// a second and "event" for each event of the SKU. It is exempt from the
// server's write timeout and, being a connection, counts against serve's
// connection cap; the feeds' own caps (FeedLimits) keep most of it for
// purchases. It ends when the session does.
func (c *Console) feed(w http.ResponseWriter, r *http.Request, s session) {
	sku := r.PathValue("sku")
	if _, err := domain.NewSKUID(sku); err != nil {
		http.Error(w, "sku: "+err.Error(), http.StatusBadRequest)
		return
	}
	// A SKU that was never defined has nothing to watch, and each watched
	// SKU costs a figures read a second.
	if _, err := c.cfg.State(r.Context(), sku); errors.Is(err, domain.ErrNotFound) {
		http.Error(w, "sku: no such SKU", http.StatusNotFound)
		return
	} else if err != nil {
		c.fail(w, r, s, fmt.Errorf("feed: read the SKU: %w", err))
		return
	}
	ch, recent, unsubscribe, err := c.hub.subscribe(sku, watcher{session: s.ID, principal: string(s.Role) + ":" + s.Name})
	switch {
	case errors.Is(err, errSessionFeeds), errors.Is(err, errPrincipalFeed):
		w.Header().Set("Retry-After", "10")
		http.Error(w, err.Error()+": close one first", http.StatusTooManyRequests)
		return
	case err != nil:
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer unsubscribe()
	if err := c.cfg.LiftDeadlines(w); err != nil {
		c.fail(w, r, s, fmt.Errorf("feed: lift the deadlines: %w", err))
		return
	}
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
