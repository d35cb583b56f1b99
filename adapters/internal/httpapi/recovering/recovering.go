// Package recovering tracks, in one serve process, the SKUs whose
// purchases the API refuses with 503 while they recover: recovering until
// the reconciler verifies them after a Redis restart, or a corrupt record
// being rebuilt from the ledger. A SKU refusing far longer than a recovery
// takes is stuck, and readiness and the metrics report it without failing
// the probe, which would take the pod out of its Service and stop the
// sales of every SKU that is fine.
package recovering

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// Bound is how long a SKU may refuse as recovering before it is reported
// as stuck. After a Redis restart a SKU recovers within the reconciler's
// settle (2 s) plus the projector's catch-up (up to ~31 s in the worst
// measured runs); a corrupt record's background repair gives up after the
// reconciler's RecordRepairWait, 2 minutes. A SKU still refusing past it is
// not a recovery in progress but a stuck one that needs an operator.
const Bound = 2 * time.Minute

// Forget drops a SKU not refused for this long: its callers were told to
// retry within a second, so by then no one is waiting on it, and counting
// it would report a refusal no buyer sees.
const Forget = 30 * time.Second

// Tracker is one process's SKUs refusing as recovering. It is safe for
// concurrent use. A sale costs one atomic load while no SKU is tracked,
// and a lock-free map lookup while some are.
type Tracker struct {
	now   func() time.Time
	epoch time.Time
	// n is the number of entries in skus, read first on every sale, so
	// that the map is touched only while it holds something.
	n    atomic.Int64
	skus sync.Map // domain.SKUID → *refusal
}

// refusal is one SKU's unbroken run of refusals, in nanoseconds since the
// tracker's epoch: time.Time's monotonic reading, so a step of the wall
// clock moves neither end.
type refusal struct {
	first int64
	last  atomic.Int64
}

// New returns a tracker reading the time from now (time.Now in a server).
func New(now func() time.Time) *Tracker {
	return &Tracker{now: now, epoch: now()}
}

func (t *Tracker) elapsed() int64 { return int64(t.now().Sub(t.epoch)) }

// Observe takes the ledger's answer err to a purchase or a reserve of sku,
// nil for a sale. A recovering or corrupt-record refusal starts tracking
// sku, or goes on with it; any other answer of the SKU's own (a sale, sold
// out, over the limit...) stops it. A failure of Redis or of a server says
// nothing of the SKU's recovery, and changes nothing.
func (t *Tracker) Observe(sku domain.SKUID, err error) {
	if err != nil && (errors.Is(err, domain.ErrRecovering) || errors.Is(err, domain.ErrCorruptRecord)) {
		t.refused(sku)
		return
	}
	if t.n.Load() == 0 || err != nil && !skuAnswered(err) {
		return
	}
	if _, tracked := t.skus.Load(sku); !tracked {
		return
	}
	if _, deleted := t.skus.LoadAndDelete(sku); deleted {
		t.n.Add(-1)
	}
}

// skuAnswered reports whether err is an answer of the SKU's state, a rule
// refusing the purchase, rather than a server failing to answer.
func skuAnswered(err error) bool {
	switch domain.CodeOf(err) {
	case domain.CodeUnavailable, domain.CodeUnsafeRedis, domain.CodeInternal, domain.CodeCorruptLedger:
		return false
	}
	return true
}

func (t *Tracker) refused(sku domain.SKUID) {
	now := t.elapsed()
	if v, ok := t.skus.Load(sku); ok {
		if r := v.(*refusal); now-r.last.Load() <= int64(Forget) {
			r.last.Store(now)
			return
		}
	}
	// A new run of refusals, or one after a silence longer than Forget,
	// which counts from now.
	r := &refusal{first: now}
	r.last.Store(now)
	if _, replaced := t.skus.Swap(sku, r); !replaced {
		t.n.Add(1)
	}
}

// Snapshot is the tracked refusals at one moment.
type Snapshot struct {
	// Refusing is the SKUs refused as recovering within Forget, with no
	// other answer since.
	Refusing int
	// Longest is how long the longest-refusing of them has been refusing.
	Longest time.Duration
	// OverBound is the SKUs refusing for longer than Bound: stuck.
	OverBound int
}

// Snapshot reads the tracked SKUs, dropping those not refused within
// Forget.
func (t *Tracker) Snapshot() Snapshot {
	now := t.elapsed()
	var s Snapshot
	t.skus.Range(func(k, v any) bool {
		r := v.(*refusal)
		if now-r.last.Load() > int64(Forget) {
			if t.skus.CompareAndDelete(k, v) {
				t.n.Add(-1)
			}
			return true
		}
		d := time.Duration(now - r.first)
		s.Refusing++
		s.Longest = max(s.Longest, d)
		if d > Bound {
			s.OverBound++
		}
		return true
	})
	return s
}

// Note is the value of readiness's "recovering" note: "ok", or how many
// SKUs have been refusing longer than Bound.
func (t *Tracker) Note() string {
	switch n := t.Snapshot().OverBound; n {
	case 0:
		return "ok"
	case 1:
		return "1 sku over " + Bound.String()
	default:
		return fmt.Sprintf("%d skus over %s", n, Bound)
	}
}

// Register adds the tracker's gauges to reg, read at scrape time. They
// have no SKU label: /metrics needs no token, and SKU ids would name
// unreleased products.
func (t *Tracker) Register(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "invledger_recovering_skus",
			Help: "SKUs whose purchases this process's API refuses now with 503 recovering or a corrupt record being rebuilt " +
				"(refused within the last 30 s, answered nothing else since): sales that wait on the reconciler or a record repair.",
		}, func() float64 { return float64(t.Snapshot().Refusing) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "invledger_recovering_longest_seconds",
			Help: "How long the longest-refusing SKU of invledger_recovering_skus has refused; " +
				"past 120 s it is stuck, not recovering (a record repair gives up at 2 minutes), and needs an operator.",
		}, func() float64 { return t.Snapshot().Longest.Seconds() }),
	)
}
