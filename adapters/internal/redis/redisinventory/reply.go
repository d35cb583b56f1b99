package redisinventory

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrScript marks a Redis reply that the scripts never produce: a version
// mismatch between binary and Redis, or a bug. It is never a purchase outcome.
var ErrScript = errors.New("unexpected redis script reply")

// reply reads the elements of a script or HMGET reply strictly: the first
// element that is missing or of another type than the caller expects is
// kept as an ErrScript naming the field, and every later read returns zero.
// Callers read all the fields they need and then check Err once.
type reply struct {
	what string
	// of, if set, is what the reply is about, joined to what only in an
	// error: a purchase does not pay for the string otherwise.
	of  string
	v   []any
	err error
}

func newReply(what string, v []any) *reply { return &reply{what: what, v: v} }

func (r *reply) name() string {
	if r.of == "" {
		return r.what
	}
	return r.what + " " + r.of
}

// Err returns the first problem met, or nil.
func (r *reply) Err() error { return r.err }

// element returns element i, or nil and false after recording its absence.
func (r *reply) element(i int, field string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	if i >= len(r.v) {
		r.err = fmt.Errorf("%s: %w: %s missing (%d elements)", r.name(), ErrScript, field, len(r.v))
		return nil, false
	}
	return r.v[i], true
}

func (r *reply) fail(i int, field, want string) {
	r.err = fmt.Errorf("%s: %w: %s (element %d) is %T %v, want %s", r.name(), ErrScript, field, i, r.v[i], r.v[i], want)
}

// Code reads element 0, a script's reply code.
func (r *reply) Code() replyCode { return replyCode(r.Int(0, "code")) }

// Int reads element i as a Lua integer.
func (r *reply) Int(i int, field string) int64 {
	v, ok := r.element(i, field)
	if !ok {
		return 0
	}
	n, ok := v.(int64)
	if !ok {
		r.fail(i, field, "an integer")
	}
	return n
}

// String reads element i as a string.
func (r *reply) String(i int, field string) string {
	v, ok := r.element(i, field)
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(i, field, "a string")
	}
	return s
}

// OptString reads element i as a string that may be nil (an absent hash
// field), which reads as "".
func (r *reply) OptString(i int, field string) string {
	v, ok := r.element(i, field)
	if !ok || v == nil {
		return ""
	}
	return r.String(i, field)
}

// Decimal reads element i as a string holding an integer, as hash fields
// and tostring() render numbers.
func (r *reply) Decimal(i int, field string) int64 {
	s := r.String(i, field)
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		r.fail(i, field, "a decimal integer")
	}
	return n
}

// Micros reads element i as Redis TIME microseconds, the scripts'
// timestamp format.
func (r *reply) Micros(i int, field string) time.Time {
	n := r.Decimal(i, field)
	if r.err != nil {
		return time.Time{}
	}
	return time.UnixMicro(n).UTC()
}
