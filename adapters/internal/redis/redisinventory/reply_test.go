package redisinventory

import (
	"errors"
	"strings"
	"testing"
)

func TestReplyNamesTheFieldOfAChangedReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     []any
		read  func(*reply)
		field string
	}{
		{"missing", []any{int64(1)}, func(r *reply) { r.Int(1, "seq") }, "seq missing"},
		{"string for integer", []any{"7"}, func(r *reply) { r.Int(0, "stock") }, "stock (element 0)"},
		{"integer for string", []any{int64(7)}, func(r *reply) { r.String(0, "event_id") }, "event_id (element 0)"},
		{"not decimal", []any{"seven"}, func(r *reply) { r.Decimal(0, "stock") }, "stock (element 0)"},
		{"not micros", []any{"yesterday"}, func(r *reply) { r.Micros(0, "closed_at") }, "closed_at (element 0)"},
		{"first error kept", []any{"x", "y"}, func(r *reply) { r.Int(0, "code"); r.Int(1, "seq") }, "code (element 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReply("op sku", tc.v)
			tc.read(r)
			err := r.Err()
			if !errors.Is(err, ErrScript) || !strings.Contains(err.Error(), tc.field) || !strings.HasPrefix(err.Error(), "op sku: ") {
				t.Fatalf("err = %v, want ErrScript naming %q", err, tc.field)
			}
		})
	}
	r := newReply("op", []any{int64(3), "open", nil, "12"})
	if n, s, o, d := r.Int(0, "a"), r.String(1, "b"), r.OptString(2, "c"), r.Decimal(3, "d"); r.Err() != nil || n != 3 || s != "open" || o != "" || d != 12 {
		t.Fatalf("well-formed reply read as %v %q %q %v, err %v", n, s, o, d, r.Err())
	}
}
