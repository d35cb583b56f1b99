package redisinventory

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// StreamIDField is the field under which a reader of the partition streams
// adds each entry's own stream id before ParseEntry: the id is not one of
// the fields the scripts write, and Watermill hands its Unmarshaller only
// the fields.
const StreamIDField = "_stream_id"

// ErrMalformedEntry marks a stream entry that can never be projected. Such
// entries go to dead_letters instead of being retried.
var ErrMalformedEntry = errors.New("malformed stream entry")

// ParseEntry turns the fields the Lua scripts write, plus StreamIDField,
// into an event. It is the one decoder of the stream format. Every problem
// is an ErrMalformedEntry naming the field.
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

// EntryFields renders a stream entry's values as the strings the scripts
// wrote: go-redis hands them over as any.
func EntryFields(values map[string]any) map[string]string {
	fields := make(map[string]string, len(values)+1)
	for k, v := range values {
		if s, ok := v.(string); ok {
			fields[k] = s
		} else {
			fields[k] = fmt.Sprint(v)
		}
	}
	return fields
}

// ParseMessage decodes one entry read from a partition stream.
func ParseMessage(m redis.XMessage) (domain.Event, error) {
	fields := EntryFields(m.Values)
	fields[StreamIDField] = m.ID
	return ParseEntry(fields)
}
