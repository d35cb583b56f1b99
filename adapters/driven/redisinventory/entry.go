package redisinventory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
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
// into an event. It is the one decoder of the stream format (field e, see
// entry.lua), whose time is the entry's stream id. Every problem is an
// ErrMalformedEntry naming the field.
func ParseEntry(fields map[string]string) (domain.Event, error) {
	p := entryParser{fields: fields}
	var e domain.Event
	e.StreamID = p.str(StreamIDField, true)
	if packed := p.str("e", true); packed != "" {
		p.packed(&e, packed)
	}
	if e.ID != "" {
		if id, err := uuid.Parse(e.ID); err != nil {
			p.fail("event_id: %q is not a uuid", e.ID)
		} else {
			e.ID = id.String()
		}
	}
	if e.SKU != "" {
		if _, err := domain.NewSKUID(e.SKU); err != nil {
			p.errs = append(p.errs, err)
		}
	}
	if e.Seq <= 0 && p.errs == nil {
		p.fail("seq: must be positive")
	}
	purchase := e.Type == domain.EventDeducted || e.Type == domain.EventReleased || e.Type.HoldEvent()
	e.User = p.str("user", purchase)
	e.RequestID = p.str("request_id", purchase)
	e.HoldID = p.str("hold_id", e.Type.HoldEvent())
	e.OrderID = p.str("order_id", false)
	if e.Type == domain.EventReserved {
		if ms := p.str("expires_at", true); ms != "" {
			e.ExpiresAt = time.UnixMilli(p.num("expires_at", ms)).UTC()
		}
	}
	e.Actor = p.str("actor", e.Type == domain.EventAdjusted || e.Type == domain.EventClosed)
	e.Reason = p.str("reason", false)
	e.TraceParent = p.str("tp", false)
	if err := errors.Join(p.errs...); err != nil {
		return domain.Event{}, fmt.Errorf("%w: %w", ErrMalformedEntry, err)
	}
	return e, nil
}

// entryParser collects every problem of one entry.
type entryParser struct {
	fields map[string]string
	errs   []error
}

func (p *entryParser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *entryParser) str(name string, required bool) string {
	v, ok := p.fields[name]
	if required && (!ok || v == "") {
		p.fail("%s: missing", name)
	}
	return v
}

func (p *entryParser) num(name, v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		p.fail("%s: %q is not an integer", name, v)
	}
	return n
}

func (p *entryParser) eventType(t string) domain.EventType {
	typ, err := domain.ParseEventType(t)
	if err != nil {
		p.errs = append(p.errs, err)
	}
	return typ
}

// packed reads field e, "event_id type sku seq qty balance", where qty is
// the signed delta for an adjusted event (every other type's delta follows
// from its type), and takes the time from the
// stream id's milliseconds (the zero time when the id is not a stream id).
func (p *entryParser) packed(e *domain.Event, v string) {
	parts := strings.Split(v, " ")
	if len(parts) != 6 {
		p.fail("e: %q has %d of 6 space-separated values (event_id type sku seq qty balance)", v, len(parts))
		return
	}
	e.ID, e.Type, e.SKU = parts[0], p.eventType(parts[1]), parts[2]
	e.Seq, e.Qty, e.Balance = p.num("seq", parts[3]), p.num("qty", parts[4]), p.num("balance", parts[5])
	if e.Type == domain.EventAdjusted {
		e.Delta, e.Qty = e.Qty, max(e.Qty, -e.Qty)
	} else {
		e.Delta = e.Type.DeltaSign() * e.Qty
	}
	// A reader that is not given the stream id (a fan-out subscriber)
	// gets no time; the projector always has it.
	ms, _, _ := strings.Cut(e.StreamID, "-")
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil && n > 0 {
		e.OccurredAt = time.UnixMilli(n).UTC()
	}
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
