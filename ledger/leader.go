package ledger

import (
	"context"
	"log/slog"
	"time"
)

// Lock is a lock shared by every process of a deployment, held by one of
// them at a time, such as a PostgreSQL advisory lock.
type Lock interface {
	// TryAcquire takes the lock if it is free; ok is false when another
	// process holds it.
	TryAcquire(ctx context.Context) (lease Lease, ok bool, err error)
	// Acquire waits for the lock, until ctx ends.
	Acquire(ctx context.Context) (Lease, error)
}

// Lease is a lock held. It is lost when its holder dies, so another
// process can take over.
type Lease interface {
	// Check reports whether the lease is still held; an error means it
	// was lost (e.g. the connection holding it broke).
	Check(ctx context.Context) error
	// Release gives the lock up.
	Release(ctx context.Context)
}

// LeaderConfig configures RunAsLeader.
type LeaderConfig struct {
	// Name names the role in logs, e.g. "reconciler".
	Name string
	// Lock is the role's lock.
	Lock Lock
	// Poll is how often a follower tries to take the lock and the leader
	// checks it still holds it: a dead leader's role is taken over within
	// Poll of its lock being released.
	Poll time.Duration
	// OnLeading, if set, is told when this process starts and stops leading.
	OnLeading func(leading bool)
	Logger    *slog.Logger
}

// RunAsLeader runs run while this process holds cfg.Lock, so exactly one
// process of a deployment runs it: the others wait, trying every Poll.
// run's context ends when ctx ends or the lease is lost; it is then run
// again once the lock is taken again. RunAsLeader returns when ctx ends,
// releasing the lock, or with run's first error.
//
// A leader that dies frees the lock with its session, and a standby takes
// over within Poll. A leader whose lock connection broke while it lives
// notices within Poll and stops, so it may overlap its successor for up to
// Poll: work that must never overlap takes a lock of its own (the
// reconciler's repairs do).
func RunAsLeader(ctx context.Context, cfg LeaderConfig, run func(context.Context) error) error {
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for {
		lease, ok, err := cfg.Lock.TryAcquire(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			cfg.Logger.Debug(cfg.Name+": cannot try for leadership", "err", err)
		case ok:
			if err := lead(ctx, cfg, lease, t.C, run); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lead runs run under lease until ctx ends or the lease is lost.
func lead(ctx context.Context, cfg LeaderConfig, lease Lease, tick <-chan time.Time, run func(context.Context) error) error {
	cfg.Logger.Info(cfg.Name + ": this process leads")
	if cfg.OnLeading != nil {
		cfg.OnLeading(true)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx) }()
	var err error
watch:
	for {
		select {
		case err = <-done:
			break watch
		case <-tick:
			checkCtx, cancelCheck := context.WithTimeout(ctx, cfg.Poll)
			lost := lease.Check(checkCtx)
			cancelCheck()
			if lost != nil && ctx.Err() == nil {
				cfg.Logger.Warn(cfg.Name+": leadership lost; another process may take over", "err", lost)
				cancel()
				err = <-done
				break watch
			}
		}
	}
	cancel()
	releaseCtx, cancelRelease := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	lease.Release(releaseCtx)
	cancelRelease()
	if cfg.OnLeading != nil {
		cfg.OnLeading(false)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}
