package redisbatch

import "context"

// Read describes the XREADGROUP (or XAUTOCLAIM) that delivered a batch of
// messages, so a handler can tell which messages arrived together: a
// consumer that writes in batches can wait for every message of a read
// and commit them in one transaction. All messages of one read share one
// *Read; a message sent again after a Nack carries none.
type Read struct {
	// Topic is the stream the read was made on.
	Topic string
	// Source is SourceNew, SourcePending or SourceClaimed.
	Source string
	// Size is how many messages of the read were delivered: entries the
	// Unmarshaller refused, entries deleted from the stream, and entries
	// already in flight here are not counted.
	Size int
}

type readKey struct{}

// ReadOf returns the Read that delivered the message whose context is ctx.
func ReadOf(ctx context.Context) (*Read, bool) {
	r, ok := ctx.Value(readKey{}).(*Read)
	return r, ok
}
