package domain

import (
	"crypto/sha1" //nolint:gosec // the chain is specified as sha1, computed in Lua by redis.sha1hex
	"encoding/hex"
	"strconv"
	"strings"
)

// EventHash is the event's link in its SKU's tamper-evident chain:
// sha1(prev_hash || canonical fields), hex. The purchase scripts compute the
// same value in Lua (chain.lua) when they append the event, so an edit of a
// ledger row breaks the chain from that row on. Each field is length-prefixed,
// so no value can be shifted into its neighbour.
func EventHash(e Event) string {
	var b strings.Builder
	b.WriteString(e.PrevHash)
	b.WriteByte('\n')
	for _, f := range []string{
		e.ID, string(e.Type), e.SKU, strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Qty, 10),
		strconv.FormatInt(e.Delta, 10), strconv.FormatInt(e.Balance, 10), e.User, e.RequestID, e.Actor, e.Reason,
		strconv.FormatInt(e.OccurredAt.UnixMicro(), 10),
	} {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
		b.WriteByte(';')
	}
	sum := sha1.Sum([]byte(b.String())) //nolint:gosec // see import
	return hex.EncodeToString(sum[:])
}

// ChainVerifier checks one SKU's chain event by event, in seq order.
type ChainVerifier struct {
	prev string
}

// Check verifies that e links to the previous event and that its hash
// matches its fields. The first failing event is where the ledger was edited.
func (v *ChainVerifier) Check(e Event) error {
	if e.PrevHash != v.prev {
		return corrupt(e, "prev_hash %q does not link to the previous event's hash %q", e.PrevHash, v.prev)
	}
	if want := EventHash(e); e.Hash != want {
		return corrupt(e, "hash %q does not match the event's fields (recomputed %q)", e.Hash, want)
	}
	v.prev = e.Hash
	return nil
}
