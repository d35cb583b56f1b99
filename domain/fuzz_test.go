package domain_test

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/invledger/invledger/domain"
)

var skuPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// validSKU is the reference definition of a SKU id.
func validSKU(s string) bool { return skuPattern.MatchString(s) && strings.Trim(s, ".") != "" }

func FuzzNewSKUID(f *testing.F) {
	for _, s := range []string{
		"", "a", "A-z_0.9:x", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"a{b}", "a b", "é", "a/b", "a\n", "\x00", "a\xff", "sku-1:2.3_4", ".", "..", "...", ".a.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := domain.NewSKUID(s)
		if want := validSKU(s); want != (err == nil) {
			t.Fatalf("NewSKUID(%q) err = %v, regexp match = %v", s, err, want)
		}
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != "sku" || !errors.Is(err, domain.ErrInvalidSKU) || !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("NewSKUID(%q) error %v is not a sku FieldError", s, err)
			}
			if !id.IsZero() {
				t.Fatalf("NewSKUID(%q) rejected but returned %q", s, id.String())
			}
			return
		}
		if id.String() != s || id.IsZero() {
			t.Fatalf("NewSKUID(%q) = %q (zero=%v)", s, id.String(), id.IsZero())
		}
	})
}

// validPrintableID is the reference definition of a user or request id.
func validPrintableID(s string, maxRunes int) bool {
	if !utf8.ValidString(s) {
		return false
	}
	n := utf8.RuneCountInString(s)
	if n < 1 || n > maxRunes {
		return false
	}
	for _, r := range s {
		if refusedByCategory(r) {
			return false
		}
	}
	return true
}

var printableIDSeeds = []string{
	"", "a", "john smith", "ユーザー", "😀", strings.Repeat("u", 128), strings.Repeat("u", 129),
	strings.Repeat("é", 128), strings.Repeat("é", 129), "a\x00", "a\n", "\t", "\xff", "\xed\xa0\x80",
	"a\u00a0b", "\u2028", "\ufffd", "\x7f", "\u202e", "\ue000", "\u0378", "a\U000e0001", "\U0001f600\U0010ffff", "\U0010fffd",
}

// checkPrintableID asserts the accepted/rejected property for one id constructor.
func checkPrintableID(t *testing.T, s string, got string, err error, field string, sentinel error) {
	t.Helper()
	want := validPrintableID(s, 128)
	if err == nil {
		if !utf8.ValidString(s) {
			t.Fatalf("%s accepted invalid UTF-8 %q", field, s)
		}
		if n := utf8.RuneCountInString(s); n < 1 || n > 128 {
			t.Fatalf("%s accepted %q with %d runes", field, s, n)
		}
		for _, r := range s {
			if refusedByCategory(r) {
				t.Fatalf("%s accepted %q with non-printable rune %U", field, s, r)
			}
		}
		if got != s {
			t.Fatalf("%s: String() = %q, want %q", field, got, s)
		}
		return
	}
	if want {
		t.Fatalf("%s rejected valid id %q: %v", field, s, err)
	}
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("%s(%q) error %v is not a *FieldError", field, s, err)
	}
	if fe.Field != field || !errors.Is(err, sentinel) || !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("%s(%q) error %v: field %q, want %q with %v", field, s, err, fe.Field, field, sentinel)
	}
}

func FuzzNewUserID(f *testing.F) {
	for _, s := range append(printableIDSeeds, " ", "u9 ", " u9", "cafe\u0301", "caf\u00e9", "\uff55\uff19", "U9", ".", "..", "/", "./") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := domain.NewUserID(s)
		if err == nil || !validPrintableID(s, 128) {
			checkPrintableID(t, s, id.String(), err, "user_id", domain.ErrInvalidUser)
		}
		if err == nil {
			// Accepted ids are canonical: nothing would normalize them.
			if strings.TrimSpace(s) != s || !norm.NFC.IsNormalString(s) {
				t.Fatalf("NewUserID accepted non-canonical %q", s)
			}
			return
		}
		if validPrintableID(s, 128) {
			// Printable, so refused for being non-canonical, and saying so.
			if strings.TrimSpace(s) == s && norm.NFC.IsNormalString(s) && strings.Trim(s, ".") != "" && s != "/" {
				t.Fatalf("NewUserID refused canonical %q: %v", s, err)
			}
			if !errors.Is(err, domain.ErrUserIDWhitespace) && !errors.Is(err, domain.ErrUserIDNotNFC) && !errors.Is(err, domain.ErrUserIDNoPath) {
				t.Fatalf("NewUserID(%q) = %v, want a whitespace, NFC or path refusal", s, err)
			}
		}
	})
}

func FuzzNewRequestID(f *testing.F) {
	for _, s := range printableIDSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := domain.NewRequestID(s)
		checkPrintableID(t, s, id.String(), err, "request_id", domain.ErrInvalidRequestID)
	})
}

func FuzzNewReason(f *testing.F) {
	for _, s := range append(printableIDSeeds, strings.Repeat("r", 256), strings.Repeat("r", 257)) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := domain.NewReason(s)
		want := s == "" || validPrintableID(s, 256)
		if want != (err == nil) {
			t.Fatalf("NewReason(%q) err = %v, want valid = %v", s, err, want)
		}
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != "reason" || !errors.Is(err, domain.ErrInvalidReason) {
				t.Fatalf("NewReason(%q) error %v is not a reason FieldError", s, err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("NewReason(%q).String() = %q", s, r.String())
		}
	})
}

// decodeEvents turns fuzz bytes into a short event list, 4 bytes per event.
// By default each event is consistent with the ones before it (next seq,
// balance = running sum of deltas, release qty = the purchase's qty), so the
// fold accepts long prefixes; flag bits corrupt individual fields.
//
//	b0: bits 0-2 type (0 stocked, 1 deducted, 2 released, 3 adjusted, 4+ unknown)
//	    bit 3 bad seq, bit 4 bad balance, bit 5 bad delta, bit 6 wrong sku,
//	    bit 7 huge (near-int64-limit) magnitude
//	b1: signed magnitude (qty for deduct/stocked, delta for adjust)
//	b2: user index; b3: request index
func decodeEvents(data []byte) []domain.Event {
	var (
		events  []domain.Event
		seq     int64
		running int64
		qtyOf   = map[string]int64{}
	)
	for i := 0; i+4 <= len(data) && len(events) < 64; i += 4 {
		b0, b1, b2, b3 := data[i], data[i+1], data[i+2], data[i+3]
		mag := int64(int8(b1))
		if b0&0x80 != 0 {
			if mag >= 0 {
				mag = math.MaxInt64 - mag
			} else {
				mag = math.MinInt64 - mag - 1 // stays in range
			}
		}
		seq++
		e := domain.Event{
			ID:        fmt.Sprintf("ev-%d", seq),
			SKU:       testSKU,
			Seq:       seq,
			User:      fmt.Sprintf("u%d", b2%4),
			RequestID: fmt.Sprintf("r%d", b3%8),
		}
		switch b0 & 7 {
		case 0:
			e.Type, e.Qty, e.Delta = domain.EventStocked, mag, mag
		case 1:
			e.Type, e.Qty, e.Delta = domain.EventDeducted, mag, -mag
			if _, seen := qtyOf[e.RequestID]; !seen {
				qtyOf[e.RequestID] = mag
			}
		case 2:
			q, ok := qtyOf[e.RequestID]
			if !ok {
				q = mag
			}
			e.Type, e.Qty, e.Delta = domain.EventReleased, q, q
		case 3:
			e.Type, e.Delta = domain.EventAdjusted, mag
		default:
			e.Type, e.Delta = domain.EventType(fmt.Sprintf("type-%d", b0&7)), mag
		}
		if b0&0x20 != 0 {
			e.Delta++
		}
		if b0&0x08 != 0 {
			e.Seq += []int64{-1, 1, 2, -e.Seq}[(b3>>3)&3] // repeat, skip, jump, or zero
		}
		if b0&0x40 != 0 {
			e.SKU = "other"
		}
		running += e.Delta
		e.Balance = running
		if b0&0x10 != 0 {
			e.Balance += int64(int8(b3)) | 1
		}
		events = append(events, e)
	}
	return events
}

func FuzzFold(f *testing.F) {
	f.Add([]byte{})
	// stocked 10, deduct u0/r0 2, release r0, adjust -3
	f.Add([]byte{0, 10, 0, 0, 1, 2, 0, 0, 2, 0, 0, 0, 3, 0xfd, 0, 0})
	// stocked 5, deduct u1/r1 1, deduct u1/r2 3, release r2, deduct u2/r1 (duplicate)
	f.Add([]byte{0, 5, 0, 0, 1, 1, 1, 1, 1, 3, 1, 2, 2, 0, 1, 2, 1, 1, 2, 1})
	// stocked huge, deduct huge, adjust huge
	f.Add([]byte{0x80, 0, 0, 0, 0x81, 0, 0, 0, 0x83, 0, 0, 0, 0x81, 0, 0, 1})
	// corruptions: bad seq, bad balance, bad delta, wrong sku, unknown type
	f.Add([]byte{0, 3, 0, 0, 0x08, 1, 0, 0})
	f.Add([]byte{0, 3, 0, 0, 0x11, 1, 0, 7})
	f.Add([]byte{0, 3, 0, 0, 0x21, 1, 0, 0})
	f.Add([]byte{0x40, 3, 0, 0})
	f.Add([]byte{0, 3, 0, 0, 0x05, 1, 0, 0})
	f.Add([]byte{3, 3, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0})

	f.Fuzz(func(t *testing.T, data []byte) {
		events := decodeEvents(data)

		s := domain.NewSKUState(testSKU)
		var (
			accepted int
			sumDelta int64
			bounded  = true // every accepted value is within MaxQuantity
		)
		var applyErr error
		for _, e := range events {
			if err := s.Apply(e); err != nil {
				applyErr = err
				break
			}
			accepted++
			sumDelta += e.Delta
			if e.Qty > domain.MaxQuantity || e.Qty < -domain.MaxQuantity ||
				e.Delta > domain.MaxQuantity || e.Delta < -domain.MaxQuantity {
				bounded = false
			}
			if s.Stock < 0 {
				t.Fatalf("accepted seq %d but stock is %d", e.Seq, s.Stock)
			}
			if s.Stock != sumDelta {
				t.Fatalf("after seq %d: stock %d, sum of deltas %d", e.Seq, s.Stock, sumDelta)
			}
			if s.Stock != e.Balance {
				t.Fatalf("after seq %d: stock %d, event balance %d", e.Seq, s.Stock, e.Balance)
			}
			if s.Seq != int64(accepted) {
				t.Fatalf("after %d events: Seq %d", accepted, s.Seq)
			}
		}
		if applyErr != nil && !errors.Is(applyErr, domain.ErrCorruptLedger) {
			t.Fatalf("Apply error %v is not ErrCorruptLedger", applyErr)
		}

		if bounded {
			// Buyers must equal the unreleased purchases, grouped by user.
			want := map[string]int64{}
			for _, p := range s.Requests {
				if !p.Released {
					want[p.User] += p.Qty
				}
			}
			if len(want) != len(s.Buyers) {
				t.Fatalf("Buyers %v, unreleased purchases %v", s.Buyers, want)
			}
			for u, n := range s.Buyers {
				if n <= 0 || want[u] != n {
					t.Fatalf("Buyers %v, unreleased purchases %v", s.Buyers, want)
				}
			}
		}

		// Fold agrees with Apply: all-or-nothing.
		got, err := domain.Fold(testSKU, events)
		if applyErr != nil {
			if err == nil || got != nil {
				t.Fatalf("Apply failed (%v) but Fold = %v, %v", applyErr, got, err)
			}
			if err.Error() != applyErr.Error() {
				t.Fatalf("Fold error %q, Apply error %q", err, applyErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("Apply accepted all events but Fold failed: %v", err)
		}
		if got.Stock != s.Stock || got.Seq != s.Seq || len(got.Buyers) != len(s.Buyers) || len(got.Requests) != len(s.Requests) {
			t.Fatalf("Fold state %+v differs from Apply state %+v", *got, *s)
		}
	})
}
