package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/invledger/invledger/ledger"
)

// LoopConfig configures RunLoop.
type LoopConfig struct {
	// Interval between full reconciliations with repair. Default 60s.
	Interval time.Duration
	// NodeRuns names the node run of every master (its master_replid, and in a cluster
	// the slots' masters); a change means every SKU must be verified again.
	NodeRuns func(ctx context.Context) (string, error)
	// NodeRunsPoll is how often NodeRuns is read. Default 1s.
	NodeRunsPoll time.Duration
	// Changed signals a new node run seen on a fresh connection.
	Changed <-chan struct{}
	// Settle is how long verification waits after a restart is noticed.
	// Projector batches that were committing when Redis died still land in
	// the ledger meanwhile; verifying before they land could hand their
	// seqs to new purchases. SKUs stay fenced while it waits. Default 2s.
	Settle time.Duration
}

func (c *LoopConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.NodeRunsPoll == 0 {
		c.NodeRunsPoll = time.Second
	}
	if c.Settle == 0 {
		c.Settle = 2 * time.Second
	}
}

// Validate reports every invalid setting at once.
func (c LoopConfig) Validate() error {
	var errs []error
	if c.Interval <= 0 || c.NodeRunsPoll <= 0 {
		errs = append(errs, errors.New("reconcile loop: Interval and NodeRunsPoll must be positive"))
	}
	if c.NodeRuns == nil {
		errs = append(errs, errors.New("reconcile loop: NodeRuns is required"))
	}
	return errors.Join(errs...)
}

// RunLoop reconciles with repair every Interval, and verifies every SKU at
// once, without waiting for the interval, whenever Redis restarted or failed
// over: purchases refused as recovering resume as soon as their SKU is
// verified, with no operator action. It returns when ctx is done.
func (r *Reconciler) RunLoop(ctx context.Context, cfg LoopConfig) error {
	ctx = ledger.WithDefaultActor(ctx, "system:reconciler")
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	interval := time.NewTicker(cfg.Interval)
	defer interval.Stop()
	poll := time.NewTicker(cfg.NodeRunsPoll)
	defer poll.Stop()
	lastNodeRuns := ""
	verify := true // at start: SKUs may be unverified since before this process
	settle := false
	for {
		if verify {
			if settle {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(cfg.Settle):
				}
			}
			r.verifyAll(ctx)
			verify, settle = false, false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-interval.C:
			if _, err := r.Run(ctx, Options{Repair: true, Trigger: "interval"}); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("reconciliation failed", "err", err)
			}
		case <-cfg.Changed:
			verify, settle = true, true
		case <-poll.C:
			nodeRuns, err := cfg.NodeRuns(ctx)
			if err != nil {
				continue // Redis is down: nothing can be verified until it is back
			}
			if nodeRuns != lastNodeRuns {
				if lastNodeRuns != "" {
					r.cfg.Logger.Warn("redis restarted, failed over or moved slots; verifying every SKU", "node_runs", nodeRuns)
				}
				settle = lastNodeRuns != ""
				lastNodeRuns, verify = nodeRuns, true
			}
		}
	}
}

// verifyAll runs verifying passes until no SKU is left fenced or ctx ends.
// A pass can leave a SKU fenced when a purchase raced its compare-and-set
// or its repair must wait for the projector; the next pass retries it.
func (r *Reconciler) verifyAll(ctx context.Context) {
	passes := 1
	for ctx.Err() == nil {
		rep, err := r.Run(ctx, Options{Repair: true, Trigger: "redis_restart"})
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Error("verification after redis restart failed", "err", err)
			}
		} else if rep.Unverified == 0 {
			return
		} else if f, ok := r.cfg.Alerts.(FencedAlerter); ok && passes%25 == 0 {
			// Every ~5 s of passes that leave SKUs fenced, say so loudly.
			f.Fenced(ctx, rep.Unverified)
		}
		passes++
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}
