package domain_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/invledger/invledger/domain"
)

var checkpointRef = regexp.MustCompile(`^([0-9]+):([0-9a-fA-F]{16,64})$`)

// FuzzParseCheckpointRef checks --since-checkpoint's parser against its
// own reading of N:MAC: N a positive int64, MAC 16 to 64 hex digits, read
// in lower case; anything else is refused naming the flag.
func FuzzParseCheckpointRef(f *testing.F) {
	for _, s := range []string{"1:0123456789abcdef", "+1:0123456789abcdef", "12:" + strings.Repeat("ab", 32), "0:0123456789abcdef", "1:0123456789abcde",
		"1:0123456789ABCDEF", "-1:0123456789abcdef", "1:" + strings.Repeat("a", 65), "x:0123456789abcdef", "", ":", "99999999999999999999:0123456789abcdef"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := domain.ParseCheckpointRef(s)
		m := checkpointRef.FindStringSubmatch(s)
		var n int64
		valid := m != nil
		if valid {
			var perr error
			n, perr = strconv.ParseInt(m[1], 10, 64)
			valid = perr == nil && n >= 1
		}
		if valid != (err == nil) {
			t.Fatalf("ParseCheckpointRef(%q) = %+v, %v; want valid = %v", s, ref, err, valid)
		}
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != "--since-checkpoint" || !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("ParseCheckpointRef(%q) error %v does not name the flag", s, err)
			}
			return
		}
		if ref.N != n || ref.MAC != strings.ToLower(m[2]) {
			t.Fatalf("ParseCheckpointRef(%q) = %+v", s, ref)
		}
	})
}
