package brokerexport

import (
	"context"
	"slices"
)

// replayBatch is how many events a replay reads at once.
const replayBatch = 256

// Replay publishes again through p every event of each SKU of from, from
// its seq on, up to the ledger's end (or its first gap) when each SKU is
// read, without the order check and without moving any cursor. It returns
// how many events it published.
func Replay(ctx context.Context, store Store, p Publisher, from map[string]int64) (int, error) {
	if err := p.Connect(ctx); err != nil {
		return 0, err
	}
	skus := make([]string, 0, len(from))
	for sku := range from {
		skus = append(skus, sku)
	}
	slices.Sort(skus)
	n := 0
	for _, sku := range skus {
		after := max(from[sku], 1) - 1
		for {
			events, err := store.EventsAfter(ctx, sku, after, replayBatch)
			if err != nil {
				return n, err
			}
			if len(events) == 0 {
				break
			}
			msgs := make([]Message, len(events))
			for i, e := range events {
				msgs[i] = NewMessage(e)
			}
			if err := p.Replay(ctx, msgs); err != nil {
				return n, err
			}
			n += len(msgs)
			after = events[len(events)-1].Seq
		}
	}
	return n, nil
}
