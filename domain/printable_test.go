package domain_test

import (
	"testing"
	"unicode"

	"github.com/invledger/invledger/domain"
)

// refusedByCategory is what domain.Unprintable was written from: Unicode
// 15.0's controls, format characters, surrogates, private use and
// separators but the space, the noncharacters and U+FFFD.
func refusedByCategory(r rune) bool {
	noncharacter := r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co, unicode.Zl, unicode.Zp) ||
		unicode.Is(unicode.Zs, r) && r != ' ' || noncharacter || r == unicode.ReplacementChar
}

// TestUnprintableIsUnicode15Categories holds the fixed list to the
// categories it was taken from, code point by code point, and shows that
// what Unicode has not assigned is printable.
func TestUnprintableIsUnicode15Categories(t *testing.T) {
	t.Parallel()
	if unicode.Version != "15.0.0" {
		// The list is the contract and does not move with Go's tables;
		// a new version's format characters or separators are a decision.
		t.Skipf("domain.Unprintable was taken from Unicode 15.0.0; Go's tables are %s: compare its new Cf, Z and Co code points with the list by hand", unicode.Version)
	}
	mismatches := 0
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if domain.IsPrintable(r) == refusedByCategory(r) {
			if mismatches++; mismatches <= 20 {
				t.Errorf("IsPrintable(%U) = %v, the categories say %v", r, domain.IsPrintable(r), !refusedByCategory(r))
			}
		}
	}
	for _, r := range []rune{-1, unicode.MaxRune + 1} {
		if domain.IsPrintable(r) {
			t.Errorf("IsPrintable(%d) = true for a number that is no code point", r)
		}
	}
	for _, r := range []rune{0x0378, 0x2065, 0x40000, 0xe0000, 0xe0080} { // unassigned in Unicode 15.0
		if !domain.IsPrintable(r) {
			t.Errorf("IsPrintable(%U) = false for a code point Unicode has not assigned", r)
		}
	}
}
