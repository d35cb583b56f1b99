package redisinventory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RedisNodeRuns tells which run of Redis is serving and whether a stream entry
// survived it, so the projector and the reconciler notice restarts and
// failovers. Its methods fill projector.ProjectorConfig's NodeRuns and
// EntryExists and reconcile.LoopConfig's NodeRuns; the projector imports this
// package for the stream format, so no interface of it can be asserted here.
type RedisNodeRuns struct {
	client redis.UniversalClient
}

// NewRedisNodeRuns returns the node runs reader of client's nodes.
func NewRedisNodeRuns(client redis.UniversalClient) *RedisNodeRuns {
	return &RedisNodeRuns{client: client}
}

// NodeRuns identifies the current run of every Redis master (its
// master_replid, see node.lua), and in a cluster which master serves each
// slot range. It changes on restart and failover, and when a slot moves to
// another master: exactly when SKUs lose their verified stamp, since the
// stamp names the run of the master that verified them.
func (r *RedisNodeRuns) NodeRuns(ctx context.Context) (string, error) {
	read := func(ctx context.Context, c *redis.Client) (string, error) {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return "", err
		}
		return c.Options().Addr + "@" + parseReplID(info), nil
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
		if err != nil {
			return "", err
		}
		slices.Sort(parts)
		//lint:ignore SA1019 CLUSTER SHARDS needs Redis 7.0, and invledger supports Redis >= 6.2 (docs/configuration.md)
		slots, err := c.ClusterSlots(ctx).Result()
		if err != nil {
			return "", err
		}
		owners := make([]string, 0, len(slots))
		for _, s := range slots {
			if len(s.Nodes) > 0 {
				owners = append(owners, fmt.Sprintf("%d-%d=%s", s.Start, s.End, s.Nodes[0].Addr))
			}
		}
		slices.Sort(owners)
		return strings.Join(parts, ",") + ";" + strings.Join(owners, ","), nil
	}
	return "", fmt.Errorf("unsupported redis client %T", r.client)
}

// EntryExists tells whether the stream still holds the entry with id.
func (r *RedisNodeRuns) EntryExists(ctx context.Context, stream, id string) (bool, error) {
	msgs, err := r.client.XRangeN(ctx, stream, id, id, 1).Result()
	if err != nil {
		return false, fmt.Errorf("look up %s in %s: %w", id, stream, err)
	}
	return len(msgs) == 1, nil
}
