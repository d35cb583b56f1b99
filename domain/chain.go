package domain

import (
	"crypto/sha1" //nolint:gosec // SHA-1 only verifies the links Redis computed before chains were sealed in the ledger
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
)

// SealAlgorithm names the hash of one link of a SKU's tamper-evident chain.
type SealAlgorithm string

const (
	// SealSHA256 is how the ledger's sealer links every event it seals
	// itself: sha256(prev_hash || canonical fields).
	SealSHA256 SealAlgorithm = "sha256"
	// SealSHA1 is the link the purchase scripts computed in Redis before the
	// chain moved to the ledger: sha1 over the same input. The sealer keeps
	// such a link, and records it as SHA-1, when it continues the chain.
	SealSHA1 SealAlgorithm = "sha1"
)

// Seal is one ledger row's link in its SKU's chain, kept beside the
// append-only row in an append-only table of its own.
type Seal struct {
	SKU       string
	Seq       int64
	PrevHash  string
	Hash      string
	Algorithm SealAlgorithm
}

// canonical writes the chained input: the previous hash, a newline, then
// each field length-prefixed, so no value can be shifted into its
// neighbour. Fields: event_id, type, sku, seq, qty, delta, balance, user,
// request_id, actor, reason, occurred_at in Unix microseconds.
func canonical(h hash.Hash, prev string, e Event) string {
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	fields := []string{
		e.ID, string(e.Type), e.SKU, strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Qty, 10),
		strconv.FormatInt(e.Delta, 10), strconv.FormatInt(e.Balance, 10), e.User, e.RequestID, e.Actor, e.Reason,
		strconv.FormatInt(e.OccurredAt.UnixMicro(), 10),
	}
	if e.Type.HoldEvent() {
		// Only hold events seal their hold fields, so every link sealed
		// before holds existed still verifies.
		var expires string
		if !e.ExpiresAt.IsZero() {
			expires = strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10)
		}
		fields = append(fields, e.HoldID, e.OrderID, expires)
	}
	for _, f := range fields {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
		h.Write([]byte{';'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// EventHash is the SHA-1 link the previous version's purchase scripts
// computed in Redis for e, chained to e.PrevHash (see canonical). It only
// verifies events that carry such a link.
func EventHash(e Event) string {
	return canonical(sha1.New(), e.PrevHash, e) //nolint:gosec // see import
}

// SealHash is the ledger's own link for e: sha256(prev || canonical fields).
func SealHash(prev string, e Event) string {
	return canonical(sha256.New(), prev, e)
}

// NextSeal links e, the row right after the one whose link is prev ("" for a
// SKU's first row), into the chain. A row that carries the SHA-1 link Redis
// computed keeps it when it links to prev; one whose own link does not match
// its fields was edited before it could be sealed, and is ErrCorruptLedger:
// the chain stops there. Any other row, including one whose Redis link
// points elsewhere (written by a previous version while a newer one ran
// beside it), is sealed with SHA-256.
func NextSeal(prev string, e Event) (Seal, error) {
	s := Seal{SKU: e.SKU, Seq: e.Seq, PrevHash: prev}
	if e.Hash != "" {
		if want := EventHash(e); want != e.Hash {
			return Seal{}, corrupt(e, "its own SHA-1 link %q from Redis does not match its fields (recomputed %q): edited before it was sealed", e.Hash, want)
		}
		if e.PrevHash == prev {
			s.Hash, s.Algorithm = e.Hash, SealSHA1
			return s, nil
		}
	}
	s.Hash, s.Algorithm = SealHash(prev, e), SealSHA256
	return s, nil
}

// ChainVerifier checks one SKU's seals row by row, in seq order.
type ChainVerifier struct {
	prev string
}

// Check verifies that s links to the previous seal and that its hash
// matches e's fields under its algorithm. The first failing row is where
// the ledger was edited.
func (v *ChainVerifier) Check(e Event, s Seal) error {
	if s.PrevHash != v.prev {
		return corrupt(e, "seal's prev_hash %q does not link to the previous seal's hash %q", s.PrevHash, v.prev)
	}
	var want string
	switch s.Algorithm {
	case SealSHA256:
		want = SealHash(s.PrevHash, e)
	case SealSHA1:
		linked := e
		linked.PrevHash = s.PrevHash
		want = EventHash(linked)
	default:
		return corrupt(e, "seal names an unknown algorithm %q", s.Algorithm)
	}
	if want != s.Hash {
		return corrupt(e, "%s hash %q does not match the row's fields (recomputed %q)", s.Algorithm, s.Hash, want)
	}
	v.prev = s.Hash
	return nil
}
