// Package seal chains each SKU's ledger rows into a tamper-evident chain,
// off the purchase path: the Sealer links rows in seq order as they become
// contiguous, with SHA-256 over the previous link and the row's canonical
// fields (domain.NextSeal), and appends the links to their own append-only
// table, so ledger_entries is never updated and the projection stays
// independent of arrival order. A missing seq stops the SKU's chain until
// it arrives; one that never does (an event Redis lost in everysec mode) is
// a reconciliation finding, and the Sealer says where it stopped.
package seal

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
)

// LinkFunc computes the seals of rows, the rows right after last (a zero
// Seal before a SKU's first seal) in seq order. It returns the seals of
// the contiguous prefix it could link.
type LinkFunc func(last domain.Seal, rows []domain.Event) []domain.Seal

// Store keeps the seals.
type Store interface {
	// Behind lists the SKUs with rows after their last seal.
	Behind(ctx context.Context) ([]string, error)
	// SealNext reads sku's last seal and up to limit rows after it, and
	// stores what link returns, in one transaction; it returns 0 while
	// another sealer works on sku.
	SealNext(ctx context.Context, sku string, limit int, link LinkFunc) (int, error)
}

// Defaults of Config.
const (
	DefaultInterval     = time.Second
	DefaultBatch        = 5000
	DefaultGapWarnAfter = time.Minute
)

// Config configures a Sealer.
type Config struct {
	Store Store
	// Interval is the pause between passes. Default DefaultInterval.
	Interval time.Duration
	// Batch is how many rows of one SKU one transaction seals. Default
	// DefaultBatch.
	Batch int
	// GapWarnAfter is how long a SKU's seal may wait at a missing seq
	// before the Sealer logs a warning: a gap is normal while the
	// projector's batches commit out of order. Default DefaultGapWarnAfter.
	GapWarnAfter time.Duration
	// Metrics may be nil.
	Metrics *Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.GapWarnAfter == 0 {
		c.GapWarnAfter = DefaultGapWarnAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("seal: Store is required"))
	}
	if c.Interval < 0 {
		errs = append(errs, errors.New("seal: Interval must not be negative"))
	}
	if c.Batch < 0 {
		errs = append(errs, errors.New("seal: Batch must not be negative"))
	}
	if c.GapWarnAfter < 0 {
		errs = append(errs, errors.New("seal: GapWarnAfter must not be negative"))
	}
	return errors.Join(errs...)
}

// Sealer seals the ledger's rows. Its passes run one at a time; several
// processes may each run one, and a SKU is sealed by one of them at a time.
type Sealer struct {
	cfg Config
	mu  sync.Mutex // one pass at a time; guards waiting
	// waiting remembers since when each SKU's seal stops at a seq, and
	// which one, so the warning comes once per stop.
	waiting map[string]gap
}

type gap struct {
	seq    int64
	since  time.Time
	warned bool
}

// New returns a Sealer.
func New(cfg Config) (*Sealer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sealer{cfg: cfg, waiting: map[string]gap{}}, nil
}

// Pass is what one pass over the ledger did.
type Pass struct {
	Sealed map[domain.SealAlgorithm]int64
	// Waiting are the SKUs whose seal stopped at a missing seq.
	Waiting []Stop
}

// Stop is the missing seq where a SKU's seal stopped.
type Stop struct {
	SKU string
	Seq int64
}

// Run seals a pass every Interval until ctx is done. A pass that fails
// (PostgreSQL unreachable) is logged and retried at the next tick.
func (s *Sealer) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.SealAll(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("seal pass failed; retrying", "err", err, "in", s.cfg.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SealAll seals every SKU as far as its rows are contiguous.
func (s *Sealer) SealAll(ctx context.Context) (Pass, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pass := Pass{Sealed: map[domain.SealAlgorithm]int64{}}
	skus, err := s.cfg.Store.Behind(ctx)
	if err != nil {
		return pass, err
	}
	seen := make(map[string]bool, len(skus))
	for _, sku := range skus {
		seen[sku] = true
		if err := s.sealSKU(ctx, sku, &pass); err != nil {
			return pass, err
		}
	}
	for sku := range s.waiting {
		if !seen[sku] {
			delete(s.waiting, sku)
		}
	}
	if m := s.cfg.Metrics; m != nil {
		m.waiting.Set(float64(len(pass.Waiting)))
	}
	return pass, nil
}

// sealSKU seals one SKU batch by batch until it reaches its last row or a
// missing seq.
func (s *Sealer) sealSKU(ctx context.Context, sku string, pass *Pass) error {
	for {
		var (
			stop   *Stop
			ended  bool
			linked map[domain.SealAlgorithm]int64
		)
		link := func(last domain.Seal, rows []domain.Event) []domain.Seal {
			seals := make([]domain.Seal, 0, len(rows))
			linked = map[domain.SealAlgorithm]int64{}
			prev, next := last.Hash, last.Seq+1
			for _, e := range rows {
				if e.Seq != next {
					stop = &Stop{SKU: sku, Seq: next}
					return seals
				}
				sl := domain.NextSeal(prev, e)
				seals = append(seals, sl)
				linked[sl.Algorithm]++
				prev, next = sl.Hash, next+1
			}
			ended = len(rows) < s.cfg.Batch
			return seals
		}
		n, err := s.cfg.Store.SealNext(ctx, sku, s.cfg.Batch, link)
		if err != nil {
			return err
		}
		if n > 0 {
			for algorithm, k := range linked {
				pass.Sealed[algorithm] += k
				if m := s.cfg.Metrics; m != nil {
					m.sealed.WithLabelValues(string(algorithm)).Add(float64(k))
				}
			}
		}
		s.stopped(pass, sku, stop)
		if stop != nil || ended || n == 0 {
			return nil
		}
	}
}

// stopped records where a SKU's seal stopped, warning once per gap that
// lasts past GapWarnAfter.
func (s *Sealer) stopped(pass *Pass, sku string, stop *Stop) {
	if stop == nil {
		delete(s.waiting, sku)
		return
	}
	g, ok := s.waiting[sku]
	if !ok || g.seq != stop.Seq {
		g = gap{seq: stop.Seq, since: time.Now()}
	}
	defer func() { s.waiting[sku] = g }()
	pass.Waiting = append(pass.Waiting, *stop)
	if !g.warned && time.Since(g.since) >= s.cfg.GapWarnAfter {
		g.warned = true
		s.cfg.Logger.Warn("the seal of a sku waits at a seq missing from the ledger; if it never arrives, reconciliation reports it",
			"sku", sku, "missing_seq", stop.Seq, "waiting", time.Since(g.since).Round(time.Second))
	}
}

// Metrics instruments a Sealer.
type Metrics struct {
	sealed  *prometheus.CounterVec
	waiting prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sealed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_ledger_seals_total",
			Help: "Ledger rows sealed into their SKU's tamper-evident chain, by algorithm (sha256).",
		}, []string{"algorithm"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "invledger_ledger_seal_waiting_skus",
			Help: "SKUs whose seal waits at a seq missing from the ledger, as of the last pass.",
		}),
	}
	reg.MustRegister(m.sealed, m.waiting)
	return m
}
