package domain

import (
	"unicode"
	"unicode/utf8"
)

// Unprintable is every code point that printable text (user, request and
// order ids, reasons, Idempotency-Key, webhook URLs) may not hold, as a
// fixed list of ranges:
//   - the controls, C0, DEL and C1 (U+0000–U+001F, U+007F–U+009F);
//   - the separators but the space: U+00A0, U+1680, U+2000–U+200A,
//     U+202F, U+205F, U+3000, and the line and paragraph separators
//     U+2028 and U+2029;
//   - the format characters, the soft hyphen, the zero-width ones, the
//     bidirectional embeddings, overrides and isolates (U+202A–U+202E,
//     U+2066–U+2069), the byte-order mark U+FEFF and the tags
//     (U+E0001, U+E0020–U+E007F) among them;
//   - the surrogates U+D800–U+DFFF, the private-use areas, and the 66
//     noncharacters (U+FDD0–U+FDEF and the last two code points of each
//     plane);
//   - U+FFFD, which decoders put for bytes that are not UTF-8 and for lone
//     surrogates, so two distinct ids would read as one.
//
// It is those general categories (Cc, Cf, Cs, Co, Zl, Zp, Zs) as Unicode
// 15.0 assigns them, written out rather than named, because a category
// moves with each Unicode version and each tool has its own:
// docs/openapi.yaml's patterns spell this same list, so that Go, Python
// and ECMA-262 engines read them alike and the server agrees with them.
// Code points Unicode has not assigned are printable: whatever a later
// version makes of them, the answer stays the one given today.
var Unprintable = &unicode.RangeTable{
	LatinOffset: 3,
	R16: []unicode.Range16{
		{Lo: 0x0000, Hi: 0x001f, Stride: 1},
		{Lo: 0x007f, Hi: 0x00a0, Stride: 1},
		{Lo: 0x00ad, Hi: 0x00ad, Stride: 1},
		{Lo: 0x0600, Hi: 0x0605, Stride: 1},
		{Lo: 0x061c, Hi: 0x061c, Stride: 1},
		{Lo: 0x06dd, Hi: 0x06dd, Stride: 1},
		{Lo: 0x070f, Hi: 0x070f, Stride: 1},
		{Lo: 0x0890, Hi: 0x0891, Stride: 1},
		{Lo: 0x08e2, Hi: 0x08e2, Stride: 1},
		{Lo: 0x1680, Hi: 0x1680, Stride: 1},
		{Lo: 0x180e, Hi: 0x180e, Stride: 1},
		{Lo: 0x2000, Hi: 0x200f, Stride: 1},
		{Lo: 0x2028, Hi: 0x202f, Stride: 1},
		{Lo: 0x205f, Hi: 0x2064, Stride: 1},
		{Lo: 0x2066, Hi: 0x206f, Stride: 1},
		{Lo: 0x3000, Hi: 0x3000, Stride: 1},
		{Lo: 0xd800, Hi: 0xf8ff, Stride: 1},
		{Lo: 0xfdd0, Hi: 0xfdef, Stride: 1},
		{Lo: 0xfeff, Hi: 0xfeff, Stride: 1},
		{Lo: 0xfff9, Hi: 0xfffb, Stride: 1},
		{Lo: 0xfffd, Hi: 0xffff, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x110bd, Hi: 0x110bd, Stride: 1},
		{Lo: 0x110cd, Hi: 0x110cd, Stride: 1},
		{Lo: 0x13430, Hi: 0x1343f, Stride: 1},
		{Lo: 0x1bca0, Hi: 0x1bca3, Stride: 1},
		{Lo: 0x1d173, Hi: 0x1d17a, Stride: 1},
		{Lo: 0x1fffe, Hi: 0x1ffff, Stride: 1},
		{Lo: 0x2fffe, Hi: 0x2ffff, Stride: 1},
		{Lo: 0x3fffe, Hi: 0x3ffff, Stride: 1},
		{Lo: 0x4fffe, Hi: 0x4ffff, Stride: 1},
		{Lo: 0x5fffe, Hi: 0x5ffff, Stride: 1},
		{Lo: 0x6fffe, Hi: 0x6ffff, Stride: 1},
		{Lo: 0x7fffe, Hi: 0x7ffff, Stride: 1},
		{Lo: 0x8fffe, Hi: 0x8ffff, Stride: 1},
		{Lo: 0x9fffe, Hi: 0x9ffff, Stride: 1},
		{Lo: 0xafffe, Hi: 0xaffff, Stride: 1},
		{Lo: 0xbfffe, Hi: 0xbffff, Stride: 1},
		{Lo: 0xcfffe, Hi: 0xcffff, Stride: 1},
		{Lo: 0xdfffe, Hi: 0xdffff, Stride: 1},
		{Lo: 0xe0001, Hi: 0xe0001, Stride: 1},
		{Lo: 0xe0020, Hi: 0xe007f, Stride: 1},
		{Lo: 0xefffe, Hi: 0xeffff, Stride: 1},
		{Lo: 0xf0000, Hi: 0x10ffff, Stride: 1},
	},
}

// IsPrintable reports whether r may be in printable text: a Unicode
// scalar value that is not Unprintable.
func IsPrintable(r rune) bool {
	return r >= 0 && r <= unicode.MaxRune && !unicode.Is(Unprintable, r)
}

// IsPrintableText reports whether s is valid UTF-8 of printable runes
// only. Invalid UTF-8 decodes to U+FFFD, which is Unprintable.
func IsPrintableText(s string) bool {
	for _, r := range s {
		if !IsPrintable(r) {
			return false
		}
	}
	return true
}

// isPrintableID accepts 1..maxChars printable runes. Control characters
// are refused because ids end up in logs, CSV and Redis replies.
func isPrintableID(s string, maxChars int) bool {
	return s != "" && len(s) <= maxChars*utf8.UTFMax && utf8.RuneCountInString(s) <= maxChars && IsPrintableText(s)
}
