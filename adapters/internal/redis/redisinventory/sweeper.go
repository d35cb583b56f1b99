package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/ledger"
)

// Sweeper defaults.
const (
	DefaultSweepBatch    = 500
	DefaultSweepParallel = 16
	DefaultSweepPerCall  = 100
	maxSweepPerCall      = 1000
)

// SweeperConfig configures a Sweeper.
type SweeperConfig struct {
	// Batch is how many due holds a pass reads from one expiry set, and
	// expires in one pipeline, at a time. Default DefaultSweepBatch.
	Batch int
	// Parallel is how many partitions a pass sweeps at once. Default
	// DefaultSweepParallel.
	Parallel int
	// PerCall is how many due holds of one SKU a single hold_end.lua call
	// expires at most, from 1 to 1,000: a call reads the SKU and the clock
	// and writes the SKU hash once for all of them, and a larger one keeps
	// Redis busy longer. Default DefaultSweepPerCall.
	PerCall int
	// Timeout bounds each Redis round trip of a pass. Default DefaultTimeout.
	Timeout time.Duration
	// Corrupt, if set, hears of every hold record a pass could not expire
	// because it does not parse; until it is rebuilt, the holds of its
	// SKU expired in the same call wait too.
	Corrupt CorruptRecordReporter
}

func (c *SweeperConfig) setDefaults() {
	if c.Batch == 0 {
		c.Batch = DefaultSweepBatch
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultSweepParallel
	}
	if c.PerCall == 0 {
		c.PerCall = DefaultSweepPerCall
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
}

// Validate reports every invalid setting at once.
func (c SweeperConfig) Validate() error {
	var errs []error
	if c.Batch < 0 {
		errs = append(errs, errors.New("sweeper: Batch must not be negative"))
	}
	if c.Parallel < 0 {
		errs = append(errs, errors.New("sweeper: Parallel must not be negative"))
	}
	if c.PerCall < 0 || c.PerCall > maxSweepPerCall {
		errs = append(errs, fmt.Errorf("sweeper: PerCall must be from 1 to %d", maxSweepPerCall))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("sweeper: Timeout must not be negative"))
	}
	return errors.Join(errs...)
}

// Sweeper expires the holds whose deadline passed (ledger.HoldExpirer,
// which ledger.HoldExpiry drives): it reads the due entries
// of each partition's expiry set and ends them with hold_end.lua, which
// checks each hold's state first: one call per SKU for up to PerCall of
// its holds, all the calls of a batch in one pipeline. It needs no leader and no
// PostgreSQL: any number of sweepers may run at once, and each hold still
// expires exactly once, because the script that expires it is atomic and
// refuses a hold that already ended. Each pass starts at a random
// partition, so concurrent sweepers mostly work on different sets.
type Sweeper struct {
	client redis.UniversalClient
	keys   Keyspace
	cfg    SweeperConfig
}

var _ ledger.HoldExpirer = (*Sweeper)(nil)

// NewSweeper returns a sweeper over client. A hold of a SKU not verified
// under the node's run (see the package doc, Fencing) is left for a later
// pass.
func NewSweeper(client redis.UniversalClient, keys Keyspace, cfg SweeperConfig) (*Sweeper, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sweeper{client: client, keys: keys, cfg: cfg}, nil
}

// ExpireDue makes one pass over every partition and returns the holds it
// expired, each with its lateness, also when err reports partitions that
// failed. Holds another sweeper, a confirm or a cancel ended first are not
// returned. The partitions are swept concurrently, Parallel at a time, so
// that Redis fsyncs the expiries of several pipelines at once; every
// partition is tried, and the errors are joined.
func (s *Sweeper) ExpireDue(ctx context.Context) ([]ledger.ExpiredHold, error) {
	n, start := s.keys.Partitions(), rand.IntN(s.keys.Partitions())
	var (
		mu      sync.Mutex
		expired []ledger.ExpiredHold
		errs    []error
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, s.cfg.Parallel)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			holds, err := s.sweepPartition(ctx, (start+i)%n)
			mu.Lock()
			defer mu.Unlock()
			expired = append(expired, holds...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return expired, errors.Join(errs...)
}

// sweepPartition expires a partition's due holds, a batch at a time, until
// a batch comes back short or expires nothing (a SKU that is recovering
// keeps its holds until it is verified).
func (s *Sweeper) sweepPartition(ctx context.Context, partition int) ([]ledger.ExpiredHold, error) {
	key := s.keys.ExpiryKey(partition)
	var total []ledger.ExpiredHold
	for {
		due, err := s.due(ctx, key)
		if err != nil || len(due) == 0 {
			return total, err
		}
		expired, err := s.expire(ctx, key, due)
		total = append(total, expired...)
		if err != nil || len(expired) == 0 || len(due) < s.cfg.Batch {
			return total, err
		}
	}
}

// due reads up to Batch entries of the expiry set whose deadline passed.
func (s *Sweeper) due(ctx context.Context, key string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	due, err := dueScript.Run(ctx, s.client, []string{key}, s.cfg.Batch).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("sweep %s: %w", key, translate(err))
	}
	return due, nil
}

// expire ends the due entries with hold_end.lua's expire, one call per
// SKU for up to PerCall of its holds, in one pipeline.
func (s *Sweeper) expire(ctx context.Context, key string, due []string) ([]ledger.ExpiredHold, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	type call struct {
		sku   string
		holds []string
		cmd   *redis.Cmd
	}
	var (
		calls   []*call
		open    = map[string]*call{} // each SKU's call that still has room
		corrupt []string
	)
	for _, member := range due {
		sku, hold, ok := strings.Cut(member, " ")
		if !ok {
			corrupt = append(corrupt, member)
			continue
		}
		c := open[sku]
		if c == nil || len(c.holds) == s.cfg.PerCall {
			c = &call{sku: sku}
			open[sku] = c
			calls = append(calls, c)
		}
		c.holds = append(c.holds, hold)
	}
	run := func(calls []*call) error {
		pipe := s.client.Pipeline()
		if len(corrupt) > 0 {
			// Never written by batch.lua; drop them so they are not read again.
			pipe.ZRem(ctx, key, corrupt)
		}
		for _, c := range calls {
			keys := s.keys.HoldKeys(c.sku)
			args := make([]any, 0, 2+2*len(c.holds))
			args = append(args, c.sku, string(actionExpire))
			for _, hold := range c.holds {
				args = append(args, hold, uuid.NewString())
			}
			c.cmd = holdEndScript.EvalSha(ctx, pipe, keys, args...)
		}
		_, err := pipe.Exec(ctx)
		return err
	}
	err := run(calls)
	// Another pass may load the script while this pipeline runs, so only the
	// calls refused with NOSCRIPT run again: a call that ran would answer
	// "already expired" the second time, and its holds would go uncounted.
	var again []*call
	for _, c := range calls {
		if c.cmd != nil && redis.HasErrorPrefix(c.cmd.Err(), "NOSCRIPT") {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		if err = holdEndScript.Load(ctx, s.client).Err(); err == nil {
			corrupt = nil
			err = run(again)
		}
	}
	if err != nil && !isScriptReplyError(err) {
		return nil, fmt.Errorf("sweep %s: %w", key, translate(err))
	}
	var (
		expired []ledger.ExpiredHold
		errs    []error
	)
	for _, c := range calls {
		op := fmt.Sprintf("expire %d holds of %s", len(c.holds), c.sku)
		v, err := c.cmd.Slice()
		if err != nil {
			s.reportCorrupt(ctx, c.sku, c.holds, err)
			errs = append(errs, fmt.Errorf("%s: %w", op, translate(err)))
			continue
		}
		replies, err := holdEndReplies(op, v, len(c.holds))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, hold := range c.holds {
			h, code, now, err := parseHold("expire hold "+hold+" of "+c.sku, c.sku, hold, replies[i])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if code == codeCorruptSKU {
				// Every hold of the call got the same answer: the SKU's
				// state does not read, and its restore brings the holds back.
				s.reportCorruptSKU(ctx, c.sku, holdRefusal(op, replies[i], subject{sku: c.sku}))
				break
			}
			if code == 1 {
				expired = append(expired, ledger.ExpiredHold{Hold: h, Lateness: now.Sub(h.ExpiresAt)})
			}
		}
	}
	return expired, errors.Join(errs...)
}

// reportCorrupt reports which of holds, the holds of sku one hold_end.lua
// call was given, have a corrupt record, when err says the call met one;
// the error does not say which, so each is probed.
func (s *Sweeper) reportCorrupt(ctx context.Context, sku string, holds []string, err error) {
	if kind, ok := corruptKind(err); !ok || kind != ledger.RecordHold || s.cfg.Corrupt == nil {
		return
	}
	for _, hold := range holds {
		rec := ledger.CorruptRecord{SKU: sku, Kind: ledger.RecordHold, HoldID: hold}
		if p, err := probeRecord(ctx, s.client, s.keys, rec); err == nil && p.Corrupt {
			s.cfg.Corrupt.ReportCorrupt(ctx, rec)
		}
	}
}

// reportCorruptSKU reports sku, whose state did not read (err), for its
// restore from the ledger.
func (s *Sweeper) reportCorruptSKU(ctx context.Context, sku string, err error) {
	c, ok := corruptOf(err)
	if !ok || s.cfg.Corrupt == nil {
		return
	}
	s.cfg.Corrupt.ReportCorrupt(ctx, ledger.CorruptRecord{SKU: sku, Kind: ledger.RecordSKU, Key: c.key, Problem: c.problem})
}

// isScriptReplyError tells an error reply of one pipelined script, which
// the per-call results report, from a failure of the pipeline itself.
func isScriptReplyError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !redis.HasErrorPrefix(err, "NOSCRIPT")
}
