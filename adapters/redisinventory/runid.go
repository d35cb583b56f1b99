package redisinventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RunIDs tracks the run_id of every Redis node the script client connects
// to. Redis changes its run_id on every restart and failover, so callers pass
// the run_id they know with each purchase, and a SKU verified under another
// run_id refuses with "recovering" until it has been checked against the
// ledger. The run_id is refreshed whenever a connection is made.
type RunIDs struct {
	mu      sync.RWMutex
	byAddr  map[string]string
	changed chan struct{}
}

// NewRunIDs returns an empty tracker.
func NewRunIDs() *RunIDs {
	return &RunIDs{byAddr: map[string]string{}, changed: make(chan struct{}, 1)}
}

// Attach makes every new connection of a client built from opts refresh the tracker.
func (t *RunIDs) Attach(opts *redis.Options) {
	opts.OnConnect = t.onConnect(opts.Addr, opts.OnConnect)
}

// AttachCluster does what Attach does for each node of a cluster client.
func (t *RunIDs) AttachCluster(opts *redis.ClusterOptions) {
	newClient := opts.NewClient
	opts.NewClient = func(o *redis.Options) *redis.Client {
		t.Attach(o)
		if newClient != nil {
			return newClient(o)
		}
		return redis.NewClient(o)
	}
}

func (t *RunIDs) onConnect(addr string, next func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
	return func(ctx context.Context, cn *redis.Conn) error {
		info, err := cn.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("read run_id of %s: %w", addr, err)
		}
		t.set(addr, parseRunID(info))
		if next != nil {
			return next(ctx, cn)
		}
		return nil
	}
}

func (t *RunIDs) set(addr, id string) {
	t.mu.Lock()
	prev := t.byAddr[addr]
	t.byAddr[addr] = id
	t.mu.Unlock()
	if prev != id {
		select {
		case t.changed <- struct{}{}:
		default:
		}
	}
}

// Get returns the last run_id seen for addr, or "" before the first connection.
func (t *RunIDs) Get(addr string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byAddr[addr]
}

// Changed receives a signal after a node was seen with a new run_id: the
// first connection, a restart, or a failover.
func (t *RunIDs) Changed() <-chan struct{} { return t.changed }

func parseRunID(info string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}

// Epoch identifies the current run of every Redis node: run_id and LASTSAVE.
// It changes on restart and failover (and LASTSAVE on a manual SAVE), which
// is exactly when SKUs lose their verified stamp.
func (r *RedisInventory) Epoch(ctx context.Context) (string, error) {
	read := func(ctx context.Context, c *redis.Client) (string, error) {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return "", err
		}
		last, err := c.LastSave(ctx).Result()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s@%s/%d", c.Options().Addr, parseRunID(info), last), nil
	}
	switch c := r.client.(type) {
	case *redis.Client:
		return read(ctx, c)
	case *redis.ClusterClient:
		var (
			mu    sync.Mutex
			parts []string
		)
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			e, err := read(ctx, node)
			mu.Lock()
			parts = append(parts, e)
			mu.Unlock()
			return err
		})
		slices.Sort(parts)
		return strings.Join(parts, ","), err
	}
	return "", fmt.Errorf("unsupported redis client %T", r.client)
}
