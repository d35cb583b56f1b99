package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// IdempotencyStore keeps, per principal and Idempotency-Key, the first
// successful answer to a write. *pgstore.PostgresIdempotencyStore
// implements it.
type IdempotencyStore interface {
	// Claim takes principal's key for a request with fingerprint, and
	// matches a kept key whose fingerprint is fingerprint or one of
	// earlier, the request's fingerprints as earlier releases made them.
	// claimed is true when the caller must run the request, then Complete
	// or Release the key; otherwise status and body are the stored answer.
	// A key used for another request is a domain.FieldError; one whose
	// first request is still running is domain.ErrConflict.
	Claim(ctx context.Context, principal, key, fingerprint string, earlier ...string) (claimed bool, status int, body []byte, err error)
	// Complete stores the answer of the request that claimed key.
	Complete(ctx context.Context, principal, key string, status int, body []byte) error
	// Release frees a claimed key whose request did not succeed, so that a
	// retry runs it again.
	Release(ctx context.Context, principal, key string) error
}

// idempotencyKey reads the Idempotency-Key header: absent is "", and a
// given key must be 1-128 visible ASCII characters and inner spaces, as
// the IETF draft's Structured Field string is: a header's other bytes are
// read as ISO-8859-1 by some clients and as UTF-8 by others, so they name
// no one key.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(wire.HeaderIdempotencyKey)
	switch len(vals) {
	case 0:
		return "", nil
	case 1:
		if !wire.ValidIdempotencyKey(vals[0]) {
			return "", domain.NewFieldError(wire.HeaderIdempotencyKey, errors.New("must be 1-128 visible ASCII characters, spaces only inside"))
		}
		return vals[0], nil
	}
	return "", domain.NewFieldError(wire.HeaderIdempotencyKey, errors.New("is given more than once"))
}

// idempotent runs h once per principal and Idempotency-Key.
//
// Idempotency-Key has two uses, one per kind of write: on a write without a
// natural key, here, it is a claim stored per principal in PostgreSQL with
// the first answer; on a purchase it is another name for the body's
// request_id (decodeDeduct), which Redis remembers with the receipt. A request
// without the header runs as it is; the first with a key runs and its
// successful answer is stored; a retry with the same key and the same
// request gets the stored answer. A failed answer is not stored, so a
// retry runs again.
func (s *server) idempotent(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotencyKey(r)
		if err != nil || key == "" {
			if err != nil {
				s.fail(w, r, err)
				return
			}
			h(w, r)
			return
		}
		rd, err := s.body(w, r)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(rd)
			if err != nil {
				err = translateJSONError(err)
			}
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		principal := principalName(r)
		claimed, status, stored, err := s.idempotency.Claim(r.Context(), principal, key,
			requestFingerprint(r, canonicalJSON(body)), release100Fingerprint(r, body))
		var fe *domain.FieldError
		if errors.As(err, &fe) && fe.Field == wire.HeaderIdempotencyKey {
			// The key was used for another request: 422, as the IETF
			// Idempotency-Key draft answers it, not a 400 of a request
			// that could never be right.
			s.writeFieldError(w, http.StatusUnprocessableEntity, string(domain.CodeInvalidInput), firstLine(fe.Err.Error()), fe.Field)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !claimed {
			w.Header()[wire.HeaderReplayed] = headerTrue
			writeRaw(w, status, stored)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rec := &answerRecorder{trackedWriter: trackedWriter{ResponseWriter: w}}
		h(rec, r)
		// The answer is sent; keeping it must not depend on the caller
		// still waiting.
		ctx := context.WithoutCancel(r.Context())
		if rec.status/100 == 2 {
			err = s.idempotency.Complete(ctx, principal, key, rec.status, rec.body.Bytes())
		} else {
			err = s.idempotency.Release(ctx, principal, key)
		}
		if err != nil {
			// A retry then finds the key claimed and waits for it to go stale.
			s.log.WarnContext(ctx, "httpapi: idempotency key not updated", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
}

// answerRecorder passes an answer through and keeps its status and body.
type answerRecorder struct {
	trackedWriter
	body bytes.Buffer
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	a.body.Write(b)
	return a.trackedWriter.Write(b)
}

// requestFingerprint is what a kept key remembers of its request: the
// method, the path and query, and body.
func requestFingerprint(r *http.Request, body []byte) string {
	sum := sha256.Sum256([]byte(r.Method + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery + "\n" + string(body)))
	return hex.EncodeToString(sum[:])
}

// release100Fingerprint is the fingerprint release 1.0.0 kept, over the
// raw body bytes, so that a key it kept still replays a byte-identical
// retry after an upgrade. Keys live 24 hours: drop it in the release after
// the first one with canonical fingerprints.
func release100Fingerprint(r *http.Request, body []byte) string {
	return requestFingerprint(r, body)
}

// canonicalJSON is body re-encoded so that spellings of one request are
// one fingerprint: object keys sorted, no whitespace, strings with one
// escaping; numbers keep their digits. A body that is not one JSON value
// is returned as it is: the handler refuses it, and a refusal is not kept.
func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}
