// Package seal chains each SKU's ledger rows into a tamper-evident chain,
// off the purchase path: the Sealer links rows in seq order as they become
// contiguous, over the previous link and the row's canonical fields
// (domain.NextSeal), and appends the links to their own append-only table,
// so ledger_entries is never updated and the projection stays independent
// of arrival order. A missing seq stops the SKU's chain until it arrives;
// one that never does (an event Redis lost in everysec mode) is a
// reconciliation finding, and the Sealer says where it stopped.
//
// With seal keys (Config.Keys) the links are HMAC-SHA256 under a secret
// that PostgreSQL never sees, and every CheckpointInterval the Sealer
// writes a keyed checkpoint of the chain heads that moved
// (domain.Checkpoint): the first one, at the first pass, vouches for the
// unkeyed chains sealed before the ledger was keyed, and each one makes a
// chain that lost its tail visible. Without keys it writes release 1.0.0's
// unkeyed links, which resist no one who can write the database, and it
// refuses to extend a ledger that holds a keyed checkpoint.
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
	// Keyed says whether the ledger holds a keyed checkpoint.
	Keyed(ctx context.Context) (bool, error)
	// Checkpoint stores next's checkpoint of the heads that moved since
	// the last checkpoint, and returns it; false when no head moved.
	Checkpoint(ctx context.Context, next CheckpointFunc) (domain.Checkpoint, bool, error)
}

// CheckpointFunc makes the checkpoint after prev (the zero Checkpoint
// before the first) of heads.
type CheckpointFunc func(prev domain.Checkpoint, heads []domain.SealHead) domain.Checkpoint

// ErrKeyRequired means the ledger is keyed but the Sealer has no seal key:
// it seals nothing rather than append unkeyed links that anyone can forge.
var ErrKeyRequired = errors.New("the ledger's seals are keyed, but this process has no seal key (--seal-keys, INVLEDGER_SEAL_KEYS): it seals nothing until one is given")

// Defaults of Config.
const (
	DefaultInterval     = time.Second
	DefaultBatch        = 5000
	DefaultGapWarnAfter = time.Minute
	// DefaultCheckpointInterval bounds the tail that can be cut off a
	// chain unseen: the rows sealed since the last checkpoint.
	DefaultCheckpointInterval = 10 * time.Second
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
	// Keys key the seals and checkpoints; the first one signs. Empty, the
	// Sealer writes unkeyed sha256 links and no checkpoint.
	Keys domain.SealKeys
	// CheckpointInterval is the least time between two checkpoints.
	// Default DefaultCheckpointInterval.
	CheckpointInterval time.Duration
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
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
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
	if c.CheckpointInterval < 0 {
		errs = append(errs, errors.New("seal: CheckpointInterval must not be negative"))
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
	// checkpointed is when this Sealer last looked for heads to
	// checkpoint; zero before its first pass.
	checkpointed time.Time
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
	// Checkpoint is the checkpoint the pass wrote last, if any.
	Checkpoint *domain.Checkpoint
}

// Stop is the missing seq where a SKU's seal stopped.
type Stop struct {
	SKU string
	Seq int64
}

// Run seals a pass every Interval until ctx is done. A pass that fails
// (PostgreSQL unreachable) is logged and retried at the next tick. Without
// keys it warns once that the seals it writes resist no one who can write
// the database.
func (s *Sealer) Run(ctx context.Context) error {
	if s.cfg.Keys.Empty() {
		s.cfg.Logger.Warn("the ledger's seals are UNKEYED: anyone who can write the database can edit a row and re-seal the chain unseen; give serve a seal key (--seal-keys, INVLEDGER_SEAL_KEYS)")
	} else {
		s.cfg.Logger.Info("sealing with a key", "key_id", s.cfg.Keys.IDs()[0], "verify_only_key_ids", s.cfg.Keys.IDs()[1:])
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.SealAll(ctx); errors.Is(err, ErrKeyRequired) {
			s.cfg.Logger.Error("seal pass refused", "err", err)
		} else if err != nil && ctx.Err() == nil {
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
	if err := s.Check(ctx); err != nil {
		return pass, err
	}
	if !s.cfg.Keys.Empty() && s.checkpointed.IsZero() {
		// The first pass vouches for the heads sealed so far, unkeyed ones
		// included, before a keyed link follows them.
		if err := s.checkpoint(ctx, &pass); err != nil {
			return pass, err
		}
	}
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
	if !s.cfg.Keys.Empty() && time.Since(s.checkpointed) >= s.cfg.CheckpointInterval {
		if err := s.checkpoint(ctx, &pass); err != nil {
			return pass, err
		}
	}
	return pass, nil
}

// Checkpoint writes a keyed checkpoint of the heads that moved since the
// last one now, whatever CheckpointInterval says; false when none moved.
func (s *Sealer) Checkpoint(ctx context.Context) (domain.Checkpoint, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pass Pass
	if err := s.checkpoint(ctx, &pass); err != nil || pass.Checkpoint == nil {
		return domain.Checkpoint{}, false, err
	}
	return *pass.Checkpoint, true, nil
}

// checkpoint writes the checkpoint of the heads that moved, if any, with
// the signing key.
func (s *Sealer) checkpoint(ctx context.Context, pass *Pass) error {
	key, ok := s.cfg.Keys.Signing()
	if !ok {
		return errors.New("seal: a checkpoint needs a seal key")
	}
	now := time.Now()
	cp, written, err := s.cfg.Store.Checkpoint(ctx, func(prev domain.Checkpoint, heads []domain.SealHead) domain.Checkpoint {
		return domain.NewCheckpoint(key, prev, now, heads)
	})
	if err != nil {
		return err
	}
	s.checkpointed = now
	if written {
		pass.Checkpoint = &cp
		if m := s.cfg.Metrics; m != nil {
			m.checkpoints.Inc()
		}
	}
	return nil
}

// Check returns ErrKeyRequired when the Sealer has no key and the ledger
// holds a keyed checkpoint: it would then seal nothing.
func (s *Sealer) Check(ctx context.Context) error {
	if !s.cfg.Keys.Empty() {
		return nil
	}
	keyed, err := s.cfg.Store.Keyed(ctx)
	if err != nil {
		return err
	}
	if keyed {
		return ErrKeyRequired
	}
	return nil
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
				sl := domain.NextSeal(s.cfg.Keys, prev, e)
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
	sealed      *prometheus.CounterVec
	waiting     prometheus.Gauge
	checkpoints prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sealed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "invledger_ledger_seals_total",
			Help: "Ledger rows sealed into their SKU's tamper-evident chain, by algorithm (hmac-sha256 keyed, sha256 unkeyed).",
		}, []string{"algorithm"}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "invledger_ledger_seal_checkpoints_total",
			Help: "Keyed checkpoints of the chain heads written by this process's sealer.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "invledger_ledger_seal_waiting_skus",
			Help: "SKUs whose seal waits at a seq missing from the ledger, as of the last pass.",
		}),
	}
	reg.MustRegister(m.sealed, m.waiting, m.checkpoints)
	return m
}
