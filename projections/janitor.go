package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// JanitorConfig configures a Janitor.
type JanitorConfig struct {
	Client  redis.UniversalClient
	Streams []string
	// Retention keeps acked entries this long, so the reconciler can still
	// see recent events in the stream.
	Retention time.Duration
	// Interval is the pause between passes.
	Interval time.Duration
	Logger   *slog.Logger
	Metrics  *Metrics
}

func (c *JanitorConfig) setDefaults() {
	if c.Retention == 0 {
		c.Retention = time.Hour
	}
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once.
func (c JanitorConfig) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("janitor: Client is required"))
	}
	if len(c.Streams) == 0 {
		errs = append(errs, errors.New("janitor: at least one stream is required"))
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("janitor: Retention must not be negative"))
	}
	if c.Interval <= 0 {
		errs = append(errs, errors.New("janitor: Interval must be positive"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("janitor: Metrics is required"))
	}
	return errors.Join(errs...)
}

// Janitor trims partition streams. The scripts never trim (a trim inside the
// purchase script could drop events nobody projected); the janitor removes
// only entries that every consumer group has both delivered and acked, and
// that are older than the retention window. It also publishes the
// projection's pending count and oldest unacked age.
type Janitor struct {
	cfg JanitorConfig
}

// NewJanitor returns a janitor.
func NewJanitor(cfg JanitorConfig) (*Janitor, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Janitor{cfg: cfg}, nil
}

// Run trims every Interval until ctx is done.
func (j *Janitor) Run(ctx context.Context) {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		for _, s := range j.cfg.Streams {
			if _, err := j.Trim(ctx, s, time.Now()); err != nil && ctx.Err() == nil {
				j.cfg.Logger.Warn("stream janitor pass failed", "stream", s, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Trim removes the stream's entries below the safe point: the lowest id that
// some group still has pending or has not yet delivered, and no later than
// now minus the retention window. It returns how many entries it removed.
// A stream without consumer groups is never trimmed: nobody has read it.
func (j *Janitor) Trim(ctx context.Context, stream string, now time.Time) (int64, error) {
	groups, err := j.cfg.Client.XInfoGroups(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return 0, nil
		}
		return 0, fmt.Errorf("groups of %s: %w", stream, err)
	}
	if len(groups) == 0 {
		return 0, nil
	}
	safe := streamID{ms: uint64(now.Add(-j.cfg.Retention).UnixMilli())}
	for _, g := range groups {
		// Everything after last-delivered-id is undelivered.
		bound, err := parseStreamID(g.LastDeliveredID)
		if err != nil {
			return 0, fmt.Errorf("group %s of %s: %w", g.Name, stream, err)
		}
		bound = bound.next()
		if g.Pending > 0 {
			p, err := j.cfg.Client.XPending(ctx, stream, g.Name).Result()
			if err != nil {
				return 0, fmt.Errorf("pending of %s/%s: %w", stream, g.Name, err)
			}
			if p.Count > 0 {
				lowest, err := parseStreamID(p.Lower)
				if err != nil {
					return 0, fmt.Errorf("pending of %s/%s: %w", stream, g.Name, err)
				}
				bound = minID(bound, lowest)
			}
		}
		safe = minID(safe, bound)
		if g.Name == ConsumerGroup {
			j.publishLag(ctx, stream, g, bound, now)
		}
	}
	if safe.ms == 0 && safe.seq == 0 {
		return 0, nil
	}
	// XTRIM MINID removes entries with ids strictly below safe.
	n, err := j.cfg.Client.XTrimMinID(ctx, stream, safe.String()).Result()
	if err != nil {
		return 0, fmt.Errorf("trim %s: %w", stream, err)
	}
	j.cfg.Metrics.trimmed.Add(float64(n))
	return n, nil
}

// publishLag sets the projector's gauges for stream: its pending count, and
// the age of the oldest entry it has not acked, pending or undelivered.
func (j *Janitor) publishLag(ctx context.Context, stream string, g redis.XInfoGroup, oldestUnacked streamID, now time.Time) {
	j.cfg.Metrics.pending.WithLabelValues(stream).Set(float64(g.Pending))
	age := 0.0
	// Only an entry that exists is waiting; an id past the stream's end is not.
	if msgs, err := j.cfg.Client.XRangeN(ctx, stream, oldestUnacked.String(), "+", 1).Result(); err == nil && len(msgs) > 0 {
		if id, err := parseStreamID(msgs[0].ID); err == nil {
			age = max(0, now.Sub(time.UnixMilli(int64(id.ms))).Seconds())
		}
	}
	j.cfg.Metrics.oldestUnacked.WithLabelValues(stream).Set(age)
}

type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, fmt.Errorf("stream id %q has no '-'", s)
	}
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return streamID{}, fmt.Errorf("stream id %q: %w", s, err)
	}
	return streamID{ms: a, seq: b}, nil
}

func (id streamID) next() streamID {
	if id.seq == ^uint64(0) {
		return streamID{ms: id.ms + 1}
	}
	return streamID{ms: id.ms, seq: id.seq + 1}
}

func (id streamID) less(o streamID) bool {
	return id.ms < o.ms || (id.ms == o.ms && id.seq < o.seq)
}

func minID(a, b streamID) streamID {
	if b.less(a) {
		return b
	}
	return a
}

func (id streamID) String() string { return fmt.Sprintf("%d-%d", id.ms, id.seq) }
