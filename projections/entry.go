// Package projections projects the partition streams into the PostgreSQL
// ledger with Watermill: at-least-once delivery made exactly-once by an
// idempotent, order-independent, group-committed insert.
package projections

import "errors"

// ErrLostEntry marks an entry from a Redis run that crashed and lost it.
// It goes to dead_letters instead of the ledger.
var ErrLostEntry = errors.New("stream entry lost by a Redis restart")
