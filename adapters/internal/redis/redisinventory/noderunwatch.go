package redisinventory

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// NodeRunWatch tracks every Redis node the script client connects to by its
// process's INFO run_id, refreshed whenever a connection is made, and
// signals a change, so that
// the reconciler verifies SKUs as soon as a node restarted or a replica took
// over. It is a prompt, not the fence: the scripts compare each SKU's fence
// with the run of the node executing them (node.lua), which no stale view of
// the caller can pass.
type NodeRunWatch struct {
	mu      sync.RWMutex
	byAddr  map[string]string
	changed chan struct{}
}

// NewNodeRunWatch returns an empty tracker.
func NewNodeRunWatch() *NodeRunWatch {
	return &NodeRunWatch{byAddr: map[string]string{}, changed: make(chan struct{}, 1)}
}

// Attach makes every new connection of a client built from opts refresh the tracker.
func (t *NodeRunWatch) Attach(opts *redis.Options) {
	opts.OnConnect = t.onConnect(opts.Addr, opts.OnConnect)
}

// AttachCluster does what Attach does for each node of a cluster client.
func (t *NodeRunWatch) AttachCluster(opts *redis.ClusterOptions) {
	newClient := opts.NewClient
	opts.NewClient = func(o *redis.Options) *redis.Client {
		t.Attach(o)
		if newClient != nil {
			return newClient(o)
		}
		return redis.NewClient(o)
	}
}

// AttachFailover does what Attach does for a Sentinel-managed master: the
// client reports one address for whichever node is master, so a failover
// shows as a new run_id there.
func (t *NodeRunWatch) AttachFailover(opts *redis.FailoverOptions) {
	opts.OnConnect = t.onConnect(FailoverAddr, opts.OnConnect)
}

// FailoverAddr is the address go-redis's Sentinel client reports in its
// Options, whichever node is master.
const FailoverAddr = "FailoverClient"

func (t *NodeRunWatch) onConnect(addr string, next func(context.Context, *redis.Conn) error) func(context.Context, *redis.Conn) error {
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

func (t *NodeRunWatch) set(addr, id string) {
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
func (t *NodeRunWatch) Get(addr string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byAddr[addr]
}

// Changed receives a signal after a node was seen with a new run_id: the
// first connection, a restart, or a failover.
func (t *NodeRunWatch) Changed() <-chan struct{} { return t.changed }

func parseRunID(info string) string { return infoField(info, "run_id") }

// parseReplID returns the master_replid of an INFO replication answer: the
// node's run as node.lua names it, "" if absent.
func parseReplID(info string) string { return infoField(info, "master_replid") }

func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
