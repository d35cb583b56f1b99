package redisinventory_test

import (
	"strings"
	"testing"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
)

// FuzzParseReceipt checks that a receipt the restore writes reads back as
// the purchase it was written from, and that no value panics the reader.
func FuzzParseReceipt(f *testing.F) {
	f.Add("u:1", "0190b5a4-7a52-7c3e-9d1b-001234567890", int64(3), int64(7), int64(2), true, int64(9), "R1:x:2")
	f.Fuzz(func(t *testing.T, user, eventID string, seq, remaining, qty int64, released bool, releaseSeq int64, raw string) {
		_, _ = redisinventory.ParseReceipt(raw)
		if strings.Contains(eventID, ":") {
			return // event ids are UUIDs
		}
		p := domain.Purchase{User: user, Qty: qty, EventID: eventID, Seq: seq, Remaining: remaining}
		if released {
			p.Released, p.ReleaseSeq, p.ReleaseEventID = true, releaseSeq, eventID
		}
		got, err := redisinventory.ParseReceipt(redisinventory.ReceiptValue(p))
		if err != nil || got != p {
			t.Fatalf("%+v read back as %+v %v", p, got, err)
		}
	})
}
