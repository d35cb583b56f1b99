package domain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
)

// SealAlgorithm names the hash of one link of a SKU's tamper-evident chain.
type SealAlgorithm string

const (
	// SealSHA256 is release 1.0.0's link, unkeyed: sha256(prev_hash ||
	// canonical fields). Anyone can recompute it, so it shows an edit only
	// to whoever cannot write ledger_seals too. A keyed ledger accepts it
	// only for rows a keyed checkpoint vouches for (those sealed before the
	// ledger was keyed).
	SealSHA256 SealAlgorithm = "sha256"
	// SealHMACSHA256 is the keyed link: HMAC-SHA256 under the seal key
	// named by the seal's KeyID, over the algorithm, the key id, prev_hash
	// and the same canonical fields. Without the key nobody can compute it.
	SealHMACSHA256 SealAlgorithm = "hmac-sha256"
)

// ErrSealKeyMissing means a seal or checkpoint names a key id while no
// seal key is configured at all, so it cannot be checked: neither intact
// nor broken.
var ErrSealKeyMissing = errors.New("seal key not configured")

// ErrSealKeyRetired means a seal or checkpoint names a key id declared
// retired (SealKeys.WithRetired): its MAC cannot be checked, only its
// links to its neighbours.
var ErrSealKeyRetired = errors.New("seal key retired")

// ErrUnknownSealKey means a seal or checkpoint names a key id that is
// neither a configured key nor declared retired while keys are configured.
// Whoever can write the database can write any key id, so it is tamper
// evidence: the error also matches ErrCorruptLedger.
var ErrUnknownSealKey = errors.New("seal key id neither configured nor declared retired")

// unknownKeyID is the outcome of a keyed seal or checkpoint, described by
// what, whose key id keys neither hold nor declare retired, and which no
// key of keys made: ErrSealKeyMissing when keys is empty, ErrSealKeyRetired
// for a retired id, else ErrUnknownSealKey.
func unknownKeyID(keys SealKeys, what, id string) error {
	switch {
	case keys.Retired(id):
		return fmt.Errorf("%w: %s is keyed with retired key id %q", ErrSealKeyRetired, what, id)
	case keys.Empty():
		return fmt.Errorf("%w: %s is keyed with key id %q", ErrSealKeyMissing, what, id)
	default:
		return unknownKeyIDError{fmt.Sprintf("%v: %s is keyed with key id %q, which is neither a given seal key nor declared retired: a forged MAC or an edited key id",
			ErrCorruptLedger, what, id)}
	}
}

// unknownKeyIDError matches ErrCorruptLedger and ErrUnknownSealKey without
// repeating the second's text.
type unknownKeyIDError struct{ msg string }

func (e unknownKeyIDError) Error() string   { return e.msg }
func (e unknownKeyIDError) Unwrap() []error { return []error{ErrCorruptLedger, ErrUnknownSealKey} }

// Seal is one ledger row's link in its SKU's chain, kept beside the
// append-only row in an append-only table of its own.
type Seal struct {
	SKU       string
	Seq       int64
	PrevHash  string
	Hash      string
	Algorithm SealAlgorithm
	// KeyID names the key of a SealHMACSHA256 link; "" for SealSHA256.
	KeyID string
}

// SealHash is the unkeyed link of e chained to prev: sha256 over prev, a
// newline, then each field length-prefixed, so no value can be shifted into
// its neighbour. Fields: event_id, type, sku, seq, qty, delta, balance,
// user, request_id, actor, reason, occurred_at in Unix microseconds,
// hold_id, order_id, expires_at in Unix milliseconds ("" when unset). Every
// event type seals every field, so an edit of any column a reader sees
// breaks the chain. It is release 1.0.0's formula, unchanged.
func SealHash(prev string, e Event) string {
	h := sha256.New()
	writeLink(h, prev, e)
	return hex.EncodeToString(h.Sum(nil))
}

// writeLink writes prev and e's canonical fields as SealHash hashes them.
func writeLink(h hash.Hash, prev string, e Event) {
	var expires string
	if !e.ExpiresAt.IsZero() {
		expires = strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10)
	}
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	for _, f := range [...]string{
		e.ID, string(e.Type), e.SKU, strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Qty, 10),
		strconv.FormatInt(e.Delta, 10), strconv.FormatInt(e.Balance, 10), e.User, e.RequestID, e.Actor, e.Reason,
		strconv.FormatInt(e.OccurredAt.UnixMicro(), 10), e.HoldID, e.OrderID, expires,
	} {
		writeField(h, f)
	}
}

// writeField writes f length-prefixed, so no value runs into the next.
func writeField(h hash.Hash, f string) {
	h.Write([]byte(strconv.Itoa(len(f))))
	h.Write([]byte{':'})
	h.Write([]byte(f))
	h.Write([]byte{';'})
}

// KeyedSealHash is the SealHMACSHA256 link of e chained to prev under k.
func KeyedSealHash(k SealKey, prev string, e Event) string {
	h := hmac.New(sha256.New, k.secret)
	writeField(h, string(SealHMACSHA256))
	writeField(h, k.ID)
	writeLink(h, prev, e)
	return hex.EncodeToString(h.Sum(nil))
}

// NextSeal links e, the row right after the one whose link is prev ("" for
// a SKU's first row), into the chain: keyed with keys' signing key, or
// unkeyed (SealSHA256) when keys is empty.
func NextSeal(keys SealKeys, prev string, e Event) Seal {
	s := Seal{SKU: e.SKU, Seq: e.Seq, PrevHash: prev}
	if k, ok := keys.Signing(); ok {
		s.Hash, s.Algorithm, s.KeyID = KeyedSealHash(k, prev, e), SealHMACSHA256, k.ID
		return s
	}
	s.Hash, s.Algorithm = SealHash(prev, e), SealSHA256
	return s
}

// ChainVerifier checks one SKU's seals row by row, in seq order. Once it
// met a keyed seal, an unkeyed one after it is a break: the sealer never
// goes back to SealSHA256, so that is a row re-sealed with the public
// formula.
type ChainVerifier struct {
	// Keys checks the keyed seals.
	Keys  SealKeys
	prev  string
	keyed bool
}

// Check verifies that s links to the previous seal and that its hash
// matches e's fields. The first failing row is where the ledger was edited
// (ErrCorruptLedger). A keyed seal whose key id is not in Keys is broken
// when a key of Keys made it (its key id was edited) or when the id is not
// declared retired either (ErrUnknownSealKey); under a retired id it
// returns ErrSealKeyRetired and the chain goes on from it, its link
// checked; with no key at all it returns ErrSealKeyMissing.
func (v *ChainVerifier) Check(e Event, s Seal) error {
	if s.PrevHash != v.prev {
		return corrupt(e, "seal's prev_hash %q does not link to the previous seal's hash %q", s.PrevHash, v.prev)
	}
	var want string
	switch s.Algorithm {
	case SealSHA256:
		if v.keyed {
			return corrupt(e, "an unkeyed sha256 seal follows keyed ones: the sealer never does that, so the row was re-sealed with the public formula")
		}
		want = SealHash(s.PrevHash, e)
	case SealHMACSHA256:
		k, ok := v.Keys.Lookup(s.KeyID)
		if !ok {
			return v.unknownKeyID(e, s)
		}
		want = KeyedSealHash(k, s.PrevHash, e)
		v.keyed = true
	default:
		return corrupt(e, "seal names an unknown algorithm %q", s.Algorithm)
	}
	if !hmac.Equal([]byte(want), []byte(s.Hash)) {
		if s.Algorithm == SealSHA256 {
			return corrupt(e, "%s hash %q does not match the row's fields (recomputed %q)", s.Algorithm, s.Hash, want)
		}
		return corrupt(e, "%s hash (key %s) does not match the row's fields: the row was edited, or re-sealed without the key", s.Algorithm, s.KeyID)
	}
	v.prev = s.Hash
	return nil
}

// unknownKeyID judges a keyed seal whose key id is not among the keys.
func (v *ChainVerifier) unknownKeyID(e Event, s Seal) error {
	if k, ok := v.Keys.matching(func(k SealKey) bool {
		return hmac.Equal([]byte(KeyedSealHash(k, s.PrevHash, e)), []byte(s.Hash))
	}); ok {
		return corrupt(e, "seal names key id %q but key %s made it: its key id was edited", s.KeyID, k.ID)
	}
	err := unknownKeyID(v.Keys, fmt.Sprintf("sku %s seq %d", e.SKU, e.Seq), s.KeyID)
	if errors.Is(err, ErrSealKeyRetired) {
		v.prev, v.keyed = s.Hash, true
	}
	return err
}
