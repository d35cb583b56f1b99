package projections

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// streamIDHook copies each entry's stream id into its fields under
// StreamIDField as XREADGROUP and XCLAIM replies arrive. Watermill's
// Unmarshaller sees only the fields, and the ledger must record where each
// event came from so gaps can be re-projected from the stream.
type streamIDHook struct{}

func (streamIDHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (streamIDHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (streamIDHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		switch c := cmd.(type) {
		case *redis.XStreamSliceCmd:
			for _, s := range c.Val() {
				tagStreamIDs(s.Messages)
			}
		case *redis.XMessageSliceCmd:
			tagStreamIDs(c.Val())
		}
		return err
	}
}

func tagStreamIDs(msgs []redis.XMessage) {
	for i := range msgs {
		if msgs[i].Values == nil {
			msgs[i].Values = map[string]any{}
		}
		msgs[i].Values[StreamIDField] = msgs[i].ID
	}
}
