package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/invledger/invledger/domain"
)

func TestNewSKUID(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"single char", "a", true},
		{"64 chars", strings.Repeat("x", 64), true},
		{"all classes", "A-z_0.9:x", true},
		{"digits only", "0123456789", true},
		{"empty", "", false},
		{"65 chars", strings.Repeat("x", 65), false},
		{"braces", "a{b}", false},
		{"open brace", "a{", false},
		{"space", "a b", false},
		{"non-ascii", "é", false},
		{"slash", "a/b", false},
		{"newline", "a\nb", false},
		{"trailing newline", "a\n", false},
		{"nul", "a\x00", false},
		{"invalid utf8", "a\xff", false},
		{"64 chars plus multibyte", strings.Repeat("x", 63) + "é", false},
		{"one dot", ".", false},
		{"two dots", "..", false},
		{"three dots", "...", false},
		{"dots with a letter", "..a", true},
		{"dotted name", "a.b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := domain.NewSKUID(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("NewSKUID(%q) error = %v", tt.in, err)
				}
				if id.String() != tt.in {
					t.Errorf("String() = %q, want %q", id.String(), tt.in)
				}
				if id.IsZero() {
					t.Error("IsZero() = true for valid id")
				}
				return
			}
			sentinel := domain.ErrInvalidSKU
			if tt.in != "" && strings.Trim(tt.in, ".") == "" {
				sentinel = domain.ErrSKUOnlyDots
			}
			assertFieldErr(t, err, "sku", sentinel)
			if !errors.Is(err, domain.ErrInvalidSKU) {
				t.Errorf("%v does not match ErrInvalidSKU", err)
			}
			if !id.IsZero() {
				t.Errorf("rejected id is not zero: %q", id.String())
			}
		})
	}
}

func TestSKUIDZeroValue(t *testing.T) {
	var id domain.SKUID
	if !id.IsZero() || id.String() != "" {
		t.Fatalf("zero SKUID: IsZero=%v String=%q", id.IsZero(), id.String())
	}
}

// printableIDCases are shared by NewUserID and NewRequestID.
var printableIDCases = []struct {
	name string
	in   string
	ok   bool
}{
	{"single ascii", "a", true},
	{"128 ascii", strings.Repeat("u", 128), true},
	{"128 multibyte runes", strings.Repeat("é", 128), true},
	{"128 four-byte runes", strings.Repeat("😀", 128), true},
	{"unicode letters", "ユーザー", true},
	{"cyrillic", "пользователь", true},
	{"spaces inside", "john smith", true},
	{"only a space", " ", true},
	{"punctuation", "a{b}/c:d@e.f", true},
	{"uuid", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", true},
	{"empty", "", false},
	{"129 ascii", strings.Repeat("u", 129), false},
	{"129 multibyte runes", strings.Repeat("é", 129), false},
	{"129 four-byte runes", strings.Repeat("😀", 129), false},
	{"nul", "a\x00b", false},
	{"newline", "a\nb", false},
	{"tab", "a\tb", false},
	{"carriage return", "a\r", false},
	{"escape", "\x1b[31m", false},
	{"del", "a\x7f", false},
	{"c1 control", "a\u0085", false},
	{"no-break space", "a\u00a0b", false},
	{"line separator", "a\u2028b", false},
	{"invalid utf8 byte", "a\xffb", false},
	{"truncated utf8", "\xe3\x81", false},
	{"encoded surrogate", "\xed\xa0\x80", false},
	{"overlong encoding", "\xc0\xaf", false},
}

// userIDOnlyCases are refused as user ids although they are printable: the
// per-user limit counts exact ids, so non-canonical ones are refused, never
// normalized.
var userIDOnlyCases = []struct {
	name    string
	in      string
	ok      bool
	refusal error
}{
	{"only a space", " ", false, domain.ErrUserIDWhitespace},
	{"trailing space", "u9 ", false, domain.ErrUserIDWhitespace},
	{"leading space", " u9", false, domain.ErrUserIDWhitespace},
	{"decomposed accent", "cafe\u0301", false, domain.ErrUserIDNotNFC},
	{"decomposed hangul", "\u1100\u1161", false, domain.ErrUserIDNotNFC},
	{"composed accent", "caf\u00e9", true, nil},
	{"space inside", "u 9", true, nil},
	{"full-width is NFC", "\uff55\uff19", true, nil},
}

func TestNewUserID(t *testing.T) {
	for _, tt := range userIDOnlyCases {
		t.Run(tt.name, func(t *testing.T) {
			id, err := domain.NewUserID(tt.in)
			if tt.ok {
				if err != nil || id.String() != tt.in {
					t.Fatalf("NewUserID(%q) = %q, %v", tt.in, id.String(), err)
				}
				return
			}
			assertFieldErr(t, err, "user_id", tt.refusal)
			if !errors.Is(err, domain.ErrInvalidUser) {
				t.Errorf("%v does not match ErrInvalidUser", err)
			}
			if id.String() != "" {
				t.Errorf("rejected id is not zero: %q", id.String())
			}
		})
	}
	for _, tt := range printableIDCases {
		if tt.in == " " {
			continue // a user id with outer whitespace: userIDOnlyCases
		}
		t.Run(tt.name, func(t *testing.T) {
			id, err := domain.NewUserID(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("NewUserID(%q) error = %v", tt.in, err)
				}
				if id.String() != tt.in {
					t.Errorf("String() = %q, want %q", id.String(), tt.in)
				}
				return
			}
			assertFieldErr(t, err, "user_id", domain.ErrInvalidUser)
			if id.String() != "" {
				t.Errorf("rejected id is not zero: %q", id.String())
			}
		})
	}
}

func TestNewRequestID(t *testing.T) {
	for _, tt := range printableIDCases {
		t.Run(tt.name, func(t *testing.T) {
			id, err := domain.NewRequestID(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("NewRequestID(%q) error = %v", tt.in, err)
				}
				if id.String() != tt.in {
					t.Errorf("String() = %q, want %q", id.String(), tt.in)
				}
				return
			}
			// An absent id says why it is needed, and is still an invalid one.
			want := domain.ErrInvalidRequestID
			if tt.in == "" {
				want = domain.ErrMissingRequestID
			}
			assertFieldErr(t, err, "request_id", want)
			if !errors.Is(err, domain.ErrInvalidRequestID) {
				t.Errorf("%v does not match ErrInvalidRequestID", err)
			}
			if id.String() != "" {
				t.Errorf("rejected id is not zero: %q", id.String())
			}
		})
	}
}

func TestNewQuantity(t *testing.T) {
	tests := []struct {
		in int64
		ok bool
	}{
		{1, true},
		{2, true},
		{domain.MaxQuantity, true},
		{0, false},
		{-1, false},
		{domain.MaxQuantity + 1, false},
		{-1 << 63, false},
		{1<<63 - 1, false},
	}
	for _, tt := range tests {
		q, err := domain.NewQuantity(tt.in)
		if tt.ok {
			if err != nil {
				t.Errorf("NewQuantity(%d) error = %v", tt.in, err)
				continue
			}
			if q.Int64() != tt.in {
				t.Errorf("NewQuantity(%d).Int64() = %d", tt.in, q.Int64())
			}
			continue
		}
		assertFieldErr(t, err, "qty", domain.ErrInvalidQuantity)
		if q.Int64() != 0 {
			t.Errorf("rejected quantity %d is not zero: %d", tt.in, q.Int64())
		}
	}
}

func TestNewReason(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"empty allowed", "", true},
		{"single", "x", true},
		{"sentence", "customer changed their mind, refund #42", true},
		{"unicode", "Rückerstattung — ok", true},
		{"256 ascii", strings.Repeat("r", 256), true},
		{"256 multibyte", strings.Repeat("ß", 256), true},
		{"257 ascii", strings.Repeat("r", 257), false},
		{"257 multibyte", strings.Repeat("ß", 257), false},
		{"newline", "line1\nline2", false},
		{"tab", "a\tb", false},
		{"nul", "\x00", false},
		{"invalid utf8", "bad\xfe", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := domain.NewReason(tt.in)
			if tt.ok {
				if err != nil {
					t.Fatalf("NewReason(%q) error = %v", tt.in, err)
				}
				if r.String() != tt.in {
					t.Errorf("String() = %q, want %q", r.String(), tt.in)
				}
				return
			}
			assertFieldErr(t, err, "reason", domain.ErrInvalidReason)
		})
	}
}

func TestFieldErrorMessageAndUnwrap(t *testing.T) {
	err := domain.NewFieldError("qty", domain.ErrInvalidQuantity)
	if got, want := err.Error(), "qty: "+domain.ErrInvalidQuantity.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(err, domain.ErrInvalidSKU) {
		t.Error("qty error matches ErrInvalidSKU")
	}
	if errors.Is(err, domain.ErrCorruptLedger) {
		t.Error("field error matches ErrCorruptLedger")
	}
	wrapped := errorsJoinWrap(err)
	assertFieldErr(t, wrapped, "qty", domain.ErrInvalidQuantity)
}

func errorsJoinWrap(err error) error { return errors.Join(errors.New("context"), err) }

func TestParseEventType(t *testing.T) {
	for _, s := range []string{"stocked", "deducted", "released", "adjusted"} {
		got, err := domain.ParseEventType(s)
		if err != nil || string(got) != s {
			t.Errorf("ParseEventType(%q) = %q, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "Stocked", "deduct", "released ", "unknown"} {
		got, err := domain.ParseEventType(s)
		if err == nil {
			t.Errorf("ParseEventType(%q) = %q, want error", s, got)
			continue
		}
		if got != "" {
			t.Errorf("ParseEventType(%q) returned type %q with error", s, got)
		}
		if !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("ParseEventType(%q) error %v does not match ErrInvalidInput", s, err)
		}
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "type" {
			t.Errorf("ParseEventType(%q) error %v: want FieldError for \"type\"", s, err)
		}
	}
}
