package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const (
	maxSKULen    = 64
	maxIDLen     = 128
	maxReasonLen = 256
	// MaxQuantity bounds every quantity and stock figure so that sums over a
	// SKU's whole life stay far from int64 overflow and exact in Lua's doubles.
	MaxQuantity = 1_000_000_000
)

// SKUID identifies a stock-keeping unit. It matches [A-Za-z0-9._:-]{1,64}:
// braces are excluded because they would break the Redis Cluster hash tag.
// An id made only of dots (".", "..") is refused: HTTP clients resolve it
// as a path segment, so its URLs would name another resource.
type SKUID struct{ v string }

// NewSKUID validates s as a SKU id.
func NewSKUID(s string) (SKUID, error) {
	if len(s) == 0 || len(s) > maxSKULen {
		return SKUID{}, NewFieldError("sku", ErrInvalidSKU)
	}
	if strings.Trim(s, ".") == "" {
		return SKUID{}, NewFieldError("sku", ErrSKUOnlyDots)
	}
	for i := 0; i < len(s); i++ {
		if !isSKUByte(s[i]) {
			return SKUID{}, NewFieldError("sku", ErrInvalidSKU)
		}
	}
	return SKUID{v: s}, nil
}

func isSKUByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	case c == '.', c == '_', c == ':', c == '-':
		return true
	}
	return false
}

// String returns the id as given.
func (s SKUID) String() string { return s.v }

// IsZero reports whether s was never validated.
func (s SKUID) IsZero() bool { return s.v == "" }

// UserID identifies a buyer: 1-128 printable characters (IsPrintable), in
// Unicode NFC, without leading or trailing whitespace, not only dots nor a
// single /. The per-user limit counts by the exact id, so ids are refused
// rather than normalized: "u9 " or a decomposed "é" would otherwise be
// another buyer. The gateway must send canonical ids.
type UserID struct{ v string }

// NewUserID validates s as a user id. It never normalizes s: an id with
// leading or trailing whitespace, or not in NFC, is a FieldError saying so.
func NewUserID(s string) (UserID, error) {
	if !isPrintableID(s, maxIDLen) {
		return UserID{}, NewFieldError("user_id", ErrInvalidUser)
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return UserID{}, NewFieldError("user_id", ErrUserIDWhitespace)
	}
	if !norm.NFC.IsNormalString(s) {
		return UserID{}, NewFieldError("user_id", ErrUserIDNotNFC)
	}
	if !pathSegmentable(s) {
		return UserID{}, NewFieldError("user_id", ErrUserIDNoPath)
	}
	return UserID{v: s}, nil
}

// String returns the id as given.
func (u UserID) String() string { return u.v }

// RequestID is the caller's idempotency key for one purchase attempt:
// 1-128 printable characters (IsPrintable). Retrying with the same RequestID
// never buys twice.
type RequestID struct{ v string }

// NewRequestID validates s as a request id; an empty one is
// ErrMissingRequestID, which says why it is needed.
func NewRequestID(s string) (RequestID, error) {
	if s == "" {
		return RequestID{}, NewFieldError("request_id", ErrMissingRequestID)
	}
	if !isPrintableID(s, maxIDLen) {
		return RequestID{}, NewFieldError("request_id", ErrInvalidRequestID)
	}
	return RequestID{v: s}, nil
}

// String returns the id as given.
func (r RequestID) String() string { return r.v }

// Quantity is a positive number of units, at most MaxQuantity.
type Quantity struct{ v int64 }

// NewQuantity validates n as a quantity.
func NewQuantity(n int64) (Quantity, error) {
	if n <= 0 || n > MaxQuantity {
		return Quantity{}, NewFieldError("qty", ErrInvalidQuantity)
	}
	return Quantity{v: n}, nil
}

// Int64 returns the number of units.
func (q Quantity) Int64() int64 { return q.v }

// Reason is a free-text justification, e.g. for a release; it may be empty.
type Reason struct{ v string }

// NewReason validates s as a reason: empty, or at most 256 printable characters.
func NewReason(s string) (Reason, error) {
	if s != "" && !isPrintableID(s, maxReasonLen) {
		return Reason{}, NewFieldError("reason", ErrInvalidReason)
	}
	return Reason{v: s}, nil
}

// String returns the reason as given.
func (r Reason) String() string { return r.v }

// pathSegmentable reports whether s can be a URL path segment that reaches
// its route: one made only of dots is resolved away by HTTP clients and
// servers (RFC 3986 dot segments), and Go's router cannot match a segment
// that is a single escaped /. The ids that name a resource in a URL must
// be segmentable.
func pathSegmentable(s string) bool { return strings.Trim(s, ".") != "" && s != "/" }
