package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/invledger/invledger/domain"
)

// DeadLetterStatus is where a dead letter stands: open until an operator
// replays it into the ledger or resolves it with a note.
type DeadLetterStatus string

const (
	DeadLetterOpen     DeadLetterStatus = "open"
	DeadLetterReplayed DeadLetterStatus = "replayed"
	DeadLetterResolved DeadLetterStatus = "resolved"
)

// ParseDeadLetterStatus validates s as a status.
func ParseDeadLetterStatus(s string) (DeadLetterStatus, error) {
	switch st := DeadLetterStatus(s); st {
	case DeadLetterOpen, DeadLetterReplayed, DeadLetterResolved:
		return st, nil
	}
	return "", domain.NewFieldError("status", errors.New("must be open, replayed or resolved"))
}

// DeadLetter is a stream entry, or one event of an entry, the projector
// could not project, with its raw fields, why, and who handled it. Event is
// the event's position in its entry, 0 for a whole entry; the fields of an
// event are those of an entry of that one event.
type DeadLetter struct {
	ID        int64
	Stream    string
	StreamID  string
	Event     int
	Fields    map[string]string
	Error     string
	CreatedAt time.Time
	Status    DeadLetterStatus
	HandledBy *string
	HandledAt *time.Time
	Note      *string
}

// DeadLetterStore keeps dead letters and who handled them.
type DeadLetterStore interface {
	// DeadLetters returns up to limit dead letters with id above after,
	// oldest first; status filters when not empty.
	DeadLetters(ctx context.Context, status DeadLetterStatus, after int64, limit int) ([]DeadLetter, error)
	DeadLetter(ctx context.Context, id int64) (DeadLetter, error)
	// Handle moves an open dead letter to status by actor with note, and
	// records the action; handled is false, and the current row returned,
	// when it was no longer open.
	Handle(ctx context.Context, id int64, status DeadLetterStatus, actor, note string) (dl DeadLetter, handled bool, err error)
	// RecordAttempt records a failed replay by actor, with why it failed.
	RecordAttempt(ctx context.Context, id int64, actor, result string) error
}

// EntryDecoder decodes a stream entry's raw fields into its events, every
// one of them or an error, as the projector does
// (streamentry.ParseEvents). A dead letter of one event of an entry
// keeps the fields of an entry of that one event.
type EntryDecoder func(fields map[string]string) ([]domain.Event, error)

// EventAppender appends events to the ledger as the projector does:
// idempotent by event id, moving balances by the rows it inserted.
type EventAppender interface {
	AppendBatch(ctx context.Context, events []domain.Event) (map[domain.EventType]int, error)
}

// DeadLetters lets an operator see, replay and resolve the entries the
// projector dead-lettered, each action recorded with its actor
// (ActorFrom).
type DeadLetters struct {
	store  DeadLetterStore
	decode EntryDecoder
	ledger EventAppender
}

// NewDeadLetters wires the flow.
func NewDeadLetters(store DeadLetterStore, decode EntryDecoder, ledger EventAppender) *DeadLetters {
	return &DeadLetters{store: store, decode: decode, ledger: ledger}
}

// DeadLetterQuery asks for dead letters with id above After, oldest first,
// at most Limit (0: DefaultAuditLimit); Status filters when set.
type DeadLetterQuery struct {
	Status string
	After  int64
	Limit  int
}

// DeadLetterPage is one page of dead letters. NextAfter is the After of the
// next page, nil on the last one.
type DeadLetterPage struct {
	DeadLetters []DeadLetter
	NextAfter   *int64
}

// List returns a page of dead letters, oldest first.
func (d *DeadLetters) List(ctx context.Context, q DeadLetterQuery) (DeadLetterPage, error) {
	var status DeadLetterStatus
	if q.Status != "" {
		var err error
		if status, err = ParseDeadLetterStatus(q.Status); err != nil {
			return DeadLetterPage{}, err
		}
	}
	if q.After < 0 {
		return DeadLetterPage{}, domain.NewFieldError("after", errCursor)
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return DeadLetterPage{}, err
	}
	rows, err := d.store.DeadLetters(ctx, status, q.After, limit+1)
	if err != nil {
		return DeadLetterPage{}, err
	}
	page := DeadLetterPage{DeadLetters: nonNil(rows)}
	if len(rows) > limit {
		page.DeadLetters = rows[:limit]
		next := rows[limit-1].ID
		page.NextAfter = &next
	}
	return page, nil
}

// Replay projects dead letter id again, once its cause is fixed: it decodes
// the stored fields and appends their events through the projector's path,
// idempotent by event id, then marks it replayed by the context's actor.
// An entry that still does not decode, or whose seq the ledger holds with
// another event, is refused (domain.ErrConflict) and the attempt recorded.
// Replaying a replayed letter returns it as it is; a resolved one is
// domain.ErrConflict.
func (d *DeadLetters) Replay(ctx context.Context, id int64) (DeadLetter, error) {
	dl, err := d.store.DeadLetter(ctx, id)
	if err != nil {
		return DeadLetter{}, err
	}
	switch dl.Status {
	case DeadLetterReplayed:
		return dl, nil
	case DeadLetterResolved:
		return dl, fmt.Errorf("%w: dead letter %d was resolved by %s", domain.ErrConflict, id, deref(dl.HandledBy))
	}
	actor := ActorFrom(ctx)
	events, err := d.decode(dl.Fields)
	if err == nil {
		_, err = d.ledger.AppendBatch(ctx, events)
		if err != nil && !errors.Is(err, domain.ErrConflict) {
			return dl, fmt.Errorf("replay dead letter %d: %w", id, err) // infrastructure: retry
		}
	}
	if err != nil {
		if rerr := d.store.RecordAttempt(ctx, id, actor, err.Error()); rerr != nil {
			return dl, errors.Join(err, rerr)
		}
		return dl, fmt.Errorf("%w: dead letter %d still cannot be projected: %s", domain.ErrConflict, id, firstLineOf(err))
	}
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	dl, _, err = d.store.Handle(ctx, id, DeadLetterReplayed, actor, "projected event "+strings.Join(ids, ", "))
	return dl, err
}

// MaxNoteLen bounds a resolution note.
const MaxNoteLen = 1000

// Resolve marks dead letter id handled without projecting it, by the
// context's actor, with note (required: why it needs no replay).
// Resolving a resolved letter returns it as it is; a replayed one is
// domain.ErrConflict.
func (d *DeadLetters) Resolve(ctx context.Context, id int64, note string) (DeadLetter, error) {
	note = strings.TrimSpace(note)
	if note == "" || utf8.RuneCountInString(note) > MaxNoteLen || !utf8.ValidString(note) {
		return DeadLetter{}, domain.NewFieldError("note", fmt.Errorf("must say why, in 1-%d characters", MaxNoteLen))
	}
	dl, _, err := d.store.Handle(ctx, id, DeadLetterResolved, ActorFrom(ctx), note)
	if err == nil && dl.Status != DeadLetterResolved {
		err = fmt.Errorf("%w: dead letter %d is already %s", domain.ErrConflict, id, dl.Status)
	}
	return dl, err
}

func firstLineOf(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
