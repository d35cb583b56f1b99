package brokerexport

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestTokenIsOneReversibleToken(t *testing.T) {
	for sku, want := range map[string]string{
		"phone-x":    "phone-x",
		"phone.x:1":  "phone~2Ex~3A1",
		"a..b":       "a~2E~2Eb",
		"Big_SKU-01": "Big_SKU-01",
		".":          "~2E",
	} {
		if got := Token(sku); got != want {
			t.Errorf("Token(%q) = %q, want %q", sku, got, want)
		}
		if back, ok := ParseToken(want); !ok || back != sku {
			t.Errorf("ParseToken(%q) = %q, %v", want, back, ok)
		}
	}
	for _, bad := range []string{"", "a.b", "~41", "~2e", "~2", "a*b"} {
		if sku, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) = %q, want a refusal", bad, sku)
		}
	}
}

// token is what NATS and AMQP topic routing see as one token, and what
// no wildcard matches specially.
var token = regexp.MustCompile(`^[A-Za-z0-9_~-]+$`)

func FuzzToken(f *testing.F) {
	for _, s := range []string{"phone.x:1", "a..b", "x", "~", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sku string) {
		tok := Token(sku)
		if sku == "" {
			if tok != "" {
				t.Fatalf("Token(\"\") = %q", tok)
			}
			return
		}
		if !token.MatchString(tok) {
			t.Fatalf("Token(%q) = %q is not one token", sku, tok)
		}
		if back, ok := ParseToken(tok); !ok || back != sku {
			t.Fatalf("ParseToken(Token(%q)) = %q, %v", sku, back, ok)
		}
		if back, ok := ParseToken(sku); ok && Token(back) != sku {
			t.Fatalf("ParseToken(%q) = %q, which Token makes %q", sku, back, Token(back))
		}
	})
}

func TestCheckPrefixNamesTheSetting(t *testing.T) {
	for _, ok := range []string{"invledger.events", "shop-1.orders_v2", "x"} {
		if err := CheckPrefix(ok); err != nil {
			t.Errorf("CheckPrefix(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a.#"} {
		err := CheckPrefix(bad)
		var se *SettingError
		if !errors.As(err, &se) || se.Setting != SettingPrefix {
			t.Errorf("CheckPrefix(%q) = %v, want an error naming %s", bad, err, SettingPrefix)
		}
	}
}

func TestRedactedErrorHidesThePassword(t *testing.T) {
	err := RedactedError(errors.New(`dial amqp://u:s3cret@h:5672/: refused`), "amqp://u:s3cret@h:5672/")
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "u:***@h") {
		t.Fatalf("got %v", err)
	}
	if err := RedactedError(errors.New("x"), "::%zz"); strings.Contains(err.Error(), "zz") {
		t.Fatalf("got %v", err)
	}
}
