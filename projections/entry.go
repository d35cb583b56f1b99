// Package projections projects the partition streams into the PostgreSQL
// ledger with Watermill: at-least-once delivery made exactly-once by an
// idempotent, order-independent, group-committed insert.
package projections

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// StreamIDField is the field under which the projector's Redis hook adds each
// entry's own stream id: Watermill hands the Unmarshaller only the fields.
const StreamIDField = "_stream_id"

// ErrMalformedEntry marks a stream entry that can never be projected. Such
// entries go to dead_letters instead of being retried.
var ErrMalformedEntry = errors.New("malformed stream entry")

// ErrLostEntry marks an entry from a Redis run that crashed and lost it.
// It goes to dead_letters instead of the ledger.
var ErrLostEntry = errors.New("stream entry lost by a Redis restart")

// ParseEntry turns the fields the Lua scripts write into an event. Every
// problem is an ErrMalformedEntry naming the field.
func ParseEntry(fields map[string]string) (domain.Event, error) {
	var errs []error
	str := func(name string, required bool) string {
		v, ok := fields[name]
		if required && (!ok || v == "") {
			errs = append(errs, fmt.Errorf("%s: missing", name))
		}
		return v
	}
	num := func(name string) int64 {
		v := str(name, true)
		if v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an integer", name, v))
		}
		return n
	}

	var e domain.Event
	e.ID = str("event_id", true)
	if e.ID != "" {
		if id, err := uuid.Parse(e.ID); err != nil {
			errs = append(errs, fmt.Errorf("event_id: %q is not a uuid", e.ID))
		} else {
			e.ID = id.String()
		}
	}
	if t := str("type", true); t != "" {
		typ, err := domain.ParseEventType(t)
		if err != nil {
			errs = append(errs, err)
		}
		e.Type = typ
	}
	e.SKU = str("sku", true)
	if e.SKU != "" {
		if _, err := domain.NewSKUID(e.SKU); err != nil {
			errs = append(errs, err)
		}
	}
	e.Seq = num("seq")
	if e.Seq <= 0 && fields["seq"] != "" {
		errs = append(errs, fmt.Errorf("seq: must be positive"))
	}
	e.Qty = num("qty")
	e.Delta = num("delta")
	e.Balance = num("balance")
	if ts := num("ts"); ts > 0 {
		e.OccurredAt = time.UnixMicro(ts).UTC()
	} else if fields["ts"] != "" {
		errs = append(errs, fmt.Errorf("ts: must be positive microseconds"))
	}
	e.User = str("user", e.Type == domain.EventDeducted || e.Type == domain.EventReleased)
	e.RequestID = str("request_id", e.Type == domain.EventDeducted || e.Type == domain.EventReleased)
	e.Actor = str("actor", e.Type == domain.EventAdjusted)
	e.Reason = str("reason", false)
	e.StreamID = str(StreamIDField, true)
	e.PrevHash = str("prev_hash", false) // empty for a SKU's first event
	e.Hash = str("hash", true)
	if err := errors.Join(errs...); err != nil {
		return domain.Event{}, fmt.Errorf("%w: %w", ErrMalformedEntry, err)
	}
	return e, nil
}
