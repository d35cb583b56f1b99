package httpapi

import (
	"context"
	"net/http"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger"
)

// DeadLetterFlow lists, replays and resolves dead letters.
// *ledger.DeadLetters implements it; the actor is the request's principal.
type DeadLetterFlow interface {
	List(ctx context.Context, q ledger.DeadLetterQuery) (ledger.DeadLetterPage, error)
	Replay(ctx context.Context, id int64) (ledger.DeadLetter, error)
	Resolve(ctx context.Context, id int64, note string) (ledger.DeadLetter, error)
}

var _ DeadLetterFlow = (*ledger.DeadLetters)(nil)

// NewDeadLetterJSON maps d into its JSON shape, field by field.
func NewDeadLetterJSON(d ledger.DeadLetter) wire.DeadLetterJSON {
	return wire.DeadLetterJSON{ID: d.ID, Stream: d.Stream, StreamID: d.StreamID, Event: d.Event, Fields: d.Fields, Error: d.Error, CreatedAt: d.CreatedAt,
		Status: string(d.Status), HandledBy: d.HandledBy, HandledAt: d.HandledAt, Note: d.Note}
}

// NewDeadLetterPageJSON maps p into its JSON shape.
func NewDeadLetterPageJSON(p ledger.DeadLetterPage) wire.DeadLetterPageJSON {
	return wire.DeadLetterPageJSON{DeadLetters: mapSlice(p.DeadLetters, NewDeadLetterJSON), NextAfter: p.NextAfter}
}

// listDeadLetters is GET /v1/dead-letters?status=&after=ID&limit=N: oldest
// first, {"dead_letters":[...],"next_after":ID|null}.
func (s *server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	q, limit, err := pageQuery(r, "status")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	after, err := queryCursorID(q, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.deadLetters.List(r.Context(), ledger.DeadLetterQuery{Status: q.Get("status"), After: after, Limit: limit})
	answer(s, w, r, page, err, NewDeadLetterPageJSON)
}

// replayDeadLetter is POST /v1/dead-letters/{id}/replay: 200 with the
// letter, replayed; 409 conflict when it still cannot be projected.
func (s *server) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := queryParams(r); err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.deadLetters.Replay(r.Context(), id)
	answer(s, w, r, d, err, NewDeadLetterJSON)
}

// resolveDeadLetter is POST /v1/dead-letters/{id}/resolve {"note"}: 200
// with the letter, resolved.
func (s *server) resolveDeadLetter(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req wire.ResolveBody
	body, err := s.body(w, r)
	if err == nil {
		err = decodeJSON(body, &req)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.deadLetters.Resolve(r.Context(), id, req.Note)
	answer(s, w, r, d, err, NewDeadLetterJSON)
}
