package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// SealAlgorithm names the hash of one link of a SKU's tamper-evident chain.
type SealAlgorithm string

// SealSHA256 is how the ledger's sealer links every event:
// sha256(prev_hash || canonical fields).
const SealSHA256 SealAlgorithm = "sha256"

// Seal is one ledger row's link in its SKU's chain, kept beside the
// append-only row in an append-only table of its own.
type Seal struct {
	SKU       string
	Seq       int64
	PrevHash  string
	Hash      string
	Algorithm SealAlgorithm
}

// SealHash is the link of e chained to prev: sha256 over prev, a newline,
// then each field length-prefixed, so no value can be shifted into its
// neighbour. Fields: event_id, type, sku, seq, qty, delta, balance, user,
// request_id, actor, reason, occurred_at in Unix microseconds, hold_id,
// order_id, expires_at in Unix milliseconds ("" when unset). Every event
// type seals every field, so an edit of any column a reader sees breaks the
// chain.
func SealHash(prev string, e Event) string {
	var expires string
	if !e.ExpiresAt.IsZero() {
		expires = strconv.FormatInt(e.ExpiresAt.UnixMilli(), 10)
	}
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	for _, f := range [...]string{
		e.ID, string(e.Type), e.SKU, strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Qty, 10),
		strconv.FormatInt(e.Delta, 10), strconv.FormatInt(e.Balance, 10), e.User, e.RequestID, e.Actor, e.Reason,
		strconv.FormatInt(e.OccurredAt.UnixMicro(), 10), e.HoldID, e.OrderID, expires,
	} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
		h.Write([]byte{';'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NextSeal links e, the row right after the one whose link is prev ("" for
// a SKU's first row), into the chain.
func NextSeal(prev string, e Event) Seal {
	return Seal{SKU: e.SKU, Seq: e.Seq, PrevHash: prev, Hash: SealHash(prev, e), Algorithm: SealSHA256}
}

// ChainVerifier checks one SKU's seals row by row, in seq order.
type ChainVerifier struct {
	prev string
}

// Check verifies that s links to the previous seal and that its hash
// matches e's fields. The first failing row is where the ledger was edited.
func (v *ChainVerifier) Check(e Event, s Seal) error {
	if s.PrevHash != v.prev {
		return corrupt(e, "seal's prev_hash %q does not link to the previous seal's hash %q", s.PrevHash, v.prev)
	}
	if s.Algorithm != SealSHA256 {
		return corrupt(e, "seal names an unknown algorithm %q", s.Algorithm)
	}
	if want := SealHash(s.PrevHash, e); want != s.Hash {
		return corrupt(e, "%s hash %q does not match the row's fields (recomputed %q)", s.Algorithm, s.Hash, want)
	}
	v.prev = s.Hash
	return nil
}
