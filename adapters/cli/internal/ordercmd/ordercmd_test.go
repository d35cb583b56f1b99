package ordercmd

import (
	"errors"
	"reflect"
	"testing"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

func TestParseLines(t *testing.T) {
	got, err := ParseLines([]string{"phone-x:1", "ns:case:12"})
	want := []wire.OrderLineBody{{SKU: "phone-x", Qty: 1}, {SKU: "ns:case", Qty: 12}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseLines = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"phone-x", ":3", "phone-x:", "phone-x:two", "phone-x:1.5"} {
		var fe *domain.FieldError
		if _, err := ParseLines([]string{"ok:1", bad}); !errors.As(err, &fe) || fe.Field != "line" {
			t.Errorf("ParseLines(%q) = %v, want a refusal naming line", bad, err)
		}
	}
}

// FuzzParseLines: any value parses into a line or is refused naming "line";
// never a panic.
func FuzzParseLines(f *testing.F) {
	for _, s := range []string{"a:1", "a", ":", "a:b:3", "a:-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		lines, err := ParseLines([]string{v})
		var fe *domain.FieldError
		switch {
		case err != nil && (!errors.As(err, &fe) || fe.Field != "line"):
			t.Fatalf("ParseLines(%q) = %v", v, err)
		case err == nil && (len(lines) != 1 || lines[0].SKU == "" || lines[0].SKU+":" != v[:len(lines[0].SKU)+1]):
			t.Fatalf("ParseLines(%q) = %+v", v, lines)
		}
	})
}
