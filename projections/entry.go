package projections

import "errors"

// ErrLostEntry marks an entry from a Redis run that crashed and lost it.
// It goes to dead_letters instead of the ledger.
var ErrLostEntry = errors.New("stream entry lost by a Redis restart")
