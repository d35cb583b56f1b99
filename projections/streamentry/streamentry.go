// Package streamentry is the format of the partition streams' entries:
// the Lua scripts of the Redis adapter write it, and every Go reader (the
// projector, the live tail, the dead-letter replay, the reconciler's read
// of events in flight) decodes it here. docs/storage.md describes it.
package streamentry

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
)

// StreamIDField is the field under which a reader of the partition streams
// adds each entry's own stream id before ParseEntryEvents: the id is not one
// of the fields the scripts write, and Watermill hands its Unmarshaller only
// the fields. Every field whose name starts with "_" is such a reader's
// annotation of the whole entry, never a column.
const StreamIDField = "_stream_id"

// ConsumerGroup is the consumer group the projector reads the partition
// streams with: its unacked entries are the events in flight.
const ConsumerGroup = "invledger-projector"

// ErrMalformedEntry marks a stream entry, or one event of it, that can
// never be projected. Such entries and events go to dead_letters instead of
// being retried.
var ErrMalformedEntry = errors.New("malformed stream entry")

// EntryEvent is one event of a stream entry as ParseEntryEvents decodes it:
// the event, or Err (an ErrMalformedEntry) when this event alone cannot be
// projected; its siblings can.
type EntryEvent struct {
	Event domain.Event
	Err   error
}

// ParseEntryEvents turns the fields the Lua scripts write, plus
// StreamIDField, into the entry's events, in the order they happened. It is
// the one decoder of the stream format; see docs/storage.md.
//
// An entry holds n >= 1 events. Field e holds n lines joined by "\n", one
// packed event each (see packed). Every other field the scripts write
// (user, request_id, tp, hold_id, expires_at, order_id, actor, reason) is a
// column: present, it holds exactly n lines, line i belonging to event i;
// absent, it is empty for every event. An entry whose e has one line is
// 1.0.0's format, its fields taken whole (never split), so every entry
// 1.0.0 wrote reads as it did. Every event's time is the entry's stream id.
//
// The error is for the whole entry, when it cannot be split into events (a
// column whose line count is not e's); a problem of one event is that
// event's Err, naming the field.
func ParseEntryEvents(fields map[string]string) ([]EntryEvent, error) {
	cols, n, err := entryColumns(fields)
	if err != nil {
		return nil, err
	}
	out := make([]EntryEvent, n)
	for i := range out {
		out[i].Event, out[i].Err = parseEvent(entryParser{fields: fields, cols: cols, i: i})
	}
	return out, nil
}

// ParseEvents decodes every event of an entry, or fails if any of them is
// malformed: for readers that take an entry whole, as a dead-letter replay
// does.
func ParseEvents(fields map[string]string) ([]domain.Event, error) {
	entry, err := ParseEntryEvents(fields)
	if err != nil {
		return nil, err
	}
	events := make([]domain.Event, len(entry))
	var errs []error
	for i, ee := range entry {
		if ee.Err != nil && len(entry) > 1 {
			errs = append(errs, fmt.Errorf("event %d of %d: %w", i, len(entry), ee.Err))
		} else if ee.Err != nil {
			errs = append(errs, ee.Err)
		}
		events[i] = ee.Event
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return events, nil
}

// ParseEntry decodes an entry of one event, as every script but batch.lua
// writes them; an entry of several events is ErrMalformedEntry.
func ParseEntry(fields map[string]string) (domain.Event, error) {
	entry, err := ParseEntryEvents(fields)
	if err != nil {
		return domain.Event{}, err
	}
	if len(entry) != 1 {
		return domain.Event{}, fmt.Errorf("%w: e: holds %d events, one expected", ErrMalformedEntry, len(entry))
	}
	return entry[0].Event, entry[0].Err
}

// EventFields returns the fields of event i of an entry that
// ParseEntryEvents split without error, as an entry of that one event
// (line i of every column, the annotations whole): what a dead letter of
// that event keeps, and decodes again to the same event. The fields of a
// one-event entry are the entry's own.
func EventFields(fields map[string]string, i int) map[string]string {
	cols, _, _ := entryColumns(fields)
	if cols == nil {
		return maps.Clone(fields)
	}
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		if lines, ok := cols[k]; ok {
			out[k] = lines[i]
		} else {
			out[k] = v
		}
	}
	return out
}

// entryColumns splits every column of an entry of several events into its
// lines; cols is nil for an entry of one event, whose fields are taken
// whole.
func entryColumns(fields map[string]string) (cols map[string][]string, n int, err error) {
	n = strings.Count(fields["e"], "\n") + 1
	if n == 1 {
		return nil, 1, nil
	}
	cols = make(map[string][]string, len(fields))
	var errs []error
	for k, v := range fields {
		if strings.HasPrefix(k, "_") {
			continue
		}
		lines := strings.Split(v, "\n")
		if len(lines) != n {
			errs = append(errs, fmt.Errorf("%s: %d lines, but e holds %d events", k, len(lines), n))
		}
		cols[k] = lines
	}
	if err := errors.Join(errs...); err != nil {
		return nil, n, fmt.Errorf("%w: %w", ErrMalformedEntry, err)
	}
	return cols, n, nil
}

// parseEvent decodes the event p reads. Every problem is an
// ErrMalformedEntry naming the field.
func parseEvent(p entryParser) (domain.Event, error) {
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

// entryParser reads event i of an entry, cols being its columns split
// into lines (nil for an entry of one event), and collects every problem
// of that event.
type entryParser struct {
	fields map[string]string
	cols   map[string][]string
	i      int
	errs   []error
}

func (p *entryParser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *entryParser) str(name string, required bool) string {
	v, ok := p.fields[name]
	if lines, col := p.cols[name]; col {
		v = lines[p.i]
	}
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

// packed reads one event's line of field e, "event_id type sku seq qty
// balance", where qty is
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
	// Two spaces in a row leave a value empty, which no script writes and
	// parseEvent's checks of the id and the sku would let through.
	if e.ID == "" {
		p.fail("event_id: missing")
	}
	if e.SKU == "" {
		p.fail("sku: missing")
	}
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

// MessageFields returns the fields of an entry read from a partition
// stream with its stream id under StreamIDField, as ParseEntryEvents takes
// them.
func MessageFields(m redis.XMessage) map[string]string {
	fields := EntryFields(m.Values)
	fields[StreamIDField] = m.ID
	return fields
}

// ParseMessage decodes an entry of one event read from a partition stream.
func ParseMessage(m redis.XMessage) (domain.Event, error) {
	return ParseEntry(MessageFields(m))
}

// StreamEntries is how the purchase script writes the events of a call to the
// partition stream.
type StreamEntries string

const (
	// EntriesPerCall writes one entry per call, carrying every event of it
	// (entry format v2, docs/storage.md).
	EntriesPerCall StreamEntries = "per-call"
	// EntriesPerEvent writes one entry per event, byte for byte the format
	// of 1.0.0, for as long as a 1.0.0 process still reads the streams.
	EntriesPerEvent StreamEntries = "per-event"
)

// Validate tells whether e is one of the values.
func (e StreamEntries) Validate() error {
	switch e {
	case EntriesPerCall, EntriesPerEvent:
		return nil
	}
	return fmt.Errorf("%q is neither %q nor %q", string(e), EntriesPerCall, EntriesPerEvent)
}
