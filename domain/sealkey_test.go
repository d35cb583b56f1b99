package domain_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/invledger/invledger/domain"
)

const (
	secretA = "0123456789abcdef0123456789abcdef"
	secretB = "fedcba9876543210fedcba9876543210"
)

// TestParseSealKeys: the first key signs, every key verifies, commas and
// lines both separate; bad entries are refused without quoting a secret.
func TestParseSealKeys(t *testing.T) {
	t.Parallel()
	keys, err := domain.ParseSealKeys(" new:" + secretB + ",\n# retired next year\nold:" + secretA + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if signing, ok := keys.Signing(); !ok || signing.ID != "new" || !slices.Equal(keys.IDs(), []string{"new", "old"}) {
		t.Fatalf("keys %v, signing %v", keys.IDs(), signing)
	}
	if empty, err := domain.ParseSealKeys(" \n"); err != nil || !empty.Empty() {
		t.Fatalf("blank: %v %v, want no key", empty.IDs(), err)
	}
	for in, want := range map[string]string{
		"k1:short-secret-xyz":              "at least 32 bytes",
		"no-colon-" + secretA:              "not id:secret",
		"bad id!:" + secretA:               "seal key id must be",
		"k1:" + secretA + ",k1:" + secretB: "given twice",
	} {
		_, err := domain.ParseSealKeys(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSealKeys(%q) = %v, want %q", in, err, want)
		}
		for _, leak := range []string{"short-secret", secretA, secretB} {
			if err != nil && strings.Contains(err.Error(), leak) {
				t.Errorf("ParseSealKeys(%q) error shows a secret: %v", in, err)
			}
		}
	}
}

var sealEntryID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}:`)

// FuzzParseSealKeys checks the parser against its own reading of the
// format: each non-blank, non-comment entry is id:secret with a valid id
// and a secret of 32 bytes or more, ids unique; the keys come back in
// order.
func FuzzParseSealKeys(f *testing.F) {
	for _, s := range []string{"", "k1:" + secretA, "k1:" + secretA + ",k2:" + secretB, "k1:" + secretA + "\nk1:" + secretB,
		"#k1:x\nk2:" + secretB, "k1:", ":" + secretA, "k1:short", " , ,", "é:" + secretA, "k:" + secretA + ":" + secretB} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ids []string
		valid := true
		for _, line := range strings.Split(s, "\n") {
			if tl := strings.TrimSpace(line); tl == "" || strings.HasPrefix(tl, "#") {
				continue
			}
			for _, e := range strings.Split(line, ",") {
				if e = strings.TrimSpace(e); e == "" {
					continue
				}
				id, secret, _ := strings.Cut(e, ":")
				if !sealEntryID.MatchString(e) || len(secret) < domain.MinSealSecret || slices.Contains(ids, id) {
					valid = false
					continue
				}
				ids = append(ids, id)
			}
		}
		keys, err := domain.ParseSealKeys(s)
		if valid != (err == nil) {
			t.Fatalf("ParseSealKeys(%q) err = %v, want valid = %v", s, err, valid)
		}
		if err == nil && !slices.Equal(keys.IDs(), ids) && !(len(ids) == 0 && len(keys.IDs()) == 0) {
			t.Fatalf("ParseSealKeys(%q) ids %v, want %v", s, keys.IDs(), ids)
		}
	})
}
