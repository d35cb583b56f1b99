package projections

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/redisinventory"
)

// streamIDHook copies each entry's stream id into its fields under
// redisinventory.StreamIDField as XREADGROUP and XCLAIM replies arrive. Watermill's
// Unmarshaller sees only the fields, and the ledger must record where each
// event came from so gaps can be re-projected from the stream. It also
// stamps the Redis epoch the entry was read under: here, as the reply
// arrives, not in the Unmarshaller, which Watermill may run seconds later
// for a message it buffered across a Redis crash.
type streamIDHook struct {
	epoch *atomic.Pointer[string]
}

// epochKey is the field holding the Redis epoch an entry was read under.
const epochKey = "_redis_epoch"

func (streamIDHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (streamIDHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h streamIDHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch c := cmd.(type) {
		case *redis.XStreamSliceCmd:
			for _, s := range c.Val() {
				h.tag(s.Messages)
			}
		case *redis.XMessageSliceCmd:
			h.tag(c.Val())
		}
		return err
	}
}

func (h streamIDHook) tag(msgs []redis.XMessage) {
	epoch := h.epoch.Load()
	for i := range msgs {
		if msgs[i].Values == nil {
			msgs[i].Values = map[string]any{}
		}
		msgs[i].Values[redisinventory.StreamIDField] = msgs[i].ID
		if epoch != nil {
			msgs[i].Values[epochKey] = *epoch
		}
	}
}
