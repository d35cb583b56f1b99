package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/invledger/invledger/adapters/http/apiwire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// DefaultMaxBodyBytes is the largest request body accepted: a larger one
// gets 400 and writes nothing.
const DefaultMaxBodyBytes = 64 << 10

// bodyError is a *domain.FieldError for the request body as a whole, so
// every decoding failure maps to 400 invalid_request like field errors do.
func bodyError(format string, args ...any) error {
	return domain.NewFieldError("body", fmt.Errorf(format, args...))
}

// decodeJSON reads exactly one JSON object from body into dst, a pointer to
// a request struct. body should be an http.MaxBytesReader: exceeding it is
// reported as a body error. Unknown fields, trailing data, an empty body and
// a value of the wrong type are all refused, with an error that names the
// field at fault. So are the two things encoding/json lets through: a key
// given twice (it would keep the last value) and a key that matches a field
// only case-insensitively ({"QTY":3}); a key must be exactly a json tag of dst.
func decodeJSON(body io.Reader, dst any) error {
	rec := recPool.Get().(*recordingReader)
	defer rec.put()
	rec.r = body
	dec := json.NewDecoder(rec)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if err == nil {
		// Anything but whitespace after the object is refused. Reading to EOF
		// also makes the size limit apply to what follows the object.
		if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
			var (
				tooBig  *http.MaxBytesError
				readErr net.Error
			)
			if errors.As(terr, &tooBig) || errors.As(terr, &readErr) {
				err = translateJSONError(terr)
			} else {
				err = bodyError("unexpected data after the JSON object")
			}
		} else {
			// rec.buf now holds one valid JSON value and whitespace.
			err = checkKeys(rec.buf, jsonKeysOf(reflect.TypeOf(dst)))
		}
	} else {
		err = translateJSONError(err)
	}
	return err
}

// recordingReader keeps a copy of what it reads, so the keys of a decoded
// body can be checked without reading it twice.
type recordingReader struct {
	r   io.Reader
	buf []byte
}

// recPool recycles the readers (and their buffers) of decodeJSON.
var recPool = sync.Pool{New: func() any { return &recordingReader{buf: make([]byte, 0, 512)} }}

// put returns rr to recPool, unless a huge body grew its buffer.
func (rr *recordingReader) put() {
	if cap(rr.buf) > 4<<10 {
		return
	}
	rr.r, rr.buf = nil, rr.buf[:0]
	recPool.Put(rr)
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	rr.buf = append(rr.buf, p[:n]...)
	return n, err
}

// jsonKeyCache maps a request struct type to its json keys, collected once.
var jsonKeyCache sync.Map // reflect.Type → []string

// jsonKeysOf returns the json keys of the struct t points to, in field
// order: each field's json tag name, or its Go name when it has none.
func jsonKeysOf(t reflect.Type) []string {
	if v, ok := jsonKeyCache.Load(t); ok {
		return v.([]string)
	}
	st := t
	for st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	var keys []string
	if st.Kind() == reflect.Struct {
		for i := range st.NumField() {
			f := st.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch name {
			case "-":
				continue
			case "":
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	if len(keys) > 64 {
		panic("httpapi: request struct " + st.String() + " has more than 64 json keys") // a programming error
	}
	v, _ := jsonKeyCache.LoadOrStore(t, keys)
	return v.([]string)
}

// checkKeys refuses a key of the top-level object of data (valid JSON, as
// Decode accepted it) that is not exactly one of keys, or that is given
// twice. A value that is not an object has no keys to check.
func checkKeys(data []byte, keys []string) error {
	sc := keyScanner{data: data}
	sc.space()
	if !sc.is('{') {
		return nil
	}
	sc.i++
	var seen uint64
	for {
		sc.space()
		if sc.is(',') {
			sc.i++
			sc.space()
		}
		if !sc.is('"') {
			return sc.err // '}' or the end: every key checked
		}
		raw, escaped := sc.str()
		k := -1
		if escaped {
			// Rare: a key spelt with escapes; compare what it decodes to.
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return bodyError("malformed JSON: %v", err)
			}
			k = slices.Index(keys, name)
			raw = []byte(name)
		} else {
			raw = raw[1 : len(raw)-1]
			for i, name := range keys {
				if string(raw) == name {
					k = i
					break
				}
			}
		}
		switch {
		case k < 0:
			for _, name := range keys {
				if strings.EqualFold(string(raw), name) {
					return bodyError("unknown field %q: keys are case-sensitive, this one is %q", raw, name)
				}
			}
			return bodyError("unknown field %q", raw)
		case seen&(1<<k) != 0:
			return domain.NewFieldError(keys[k], errors.New("is given more than once"))
		}
		seen |= 1 << k
		sc.space()
		sc.i++ // ':'
		sc.skipValue()
	}
}

// keyScanner walks JSON that encoding/json already validated. Out of range
// reads stop it with an error instead of panicking.
type keyScanner struct {
	data []byte
	i    int
	err  error
}

func (s *keyScanner) is(c byte) bool { return s.i < len(s.data) && s.data[s.i] == c }

func (s *keyScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// str consumes the string at s.i and returns it with its quotes, and
// whether it holds an escape.
func (s *keyScanner) str() (raw []byte, escaped bool) {
	start := s.i
	s.i++
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			s.i++
			return s.data[start:s.i], escaped
		}
		s.i++
	}
	s.err = bodyError("malformed JSON: unexpected end of input")
	return s.data[start:], escaped
}

// skipValue consumes one value: a string, a nested object or array, or a
// literal or number.
func (s *keyScanner) skipValue() {
	s.space()
	depth := 0
	for s.i < len(s.data) && s.err == nil {
		switch c := s.data[s.i]; c {
		case '"':
			s.str()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				s.i++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
		}
		s.i++
	}
}

// errBodyTimeout is a request body that did not arrive within the
// server's read timeout: 408, not the caller's malformed JSON.
var errBodyTimeout = errors.New("the request body did not arrive within the server's read timeout")

// translateJSONError turns an encoding/json error into a *domain.FieldError
// naming the field when there is one, and "body" otherwise. A failure to
// read the body is errBodyTimeout when it timed out; its text, which holds
// socket addresses, never reaches the caller.
func translateJSONError(err error) error {
	var (
		tooBig  *http.MaxBytesError
		readErr net.Error
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &tooBig):
		return bodyError("larger than %d bytes", tooBig.Limit)
	case errors.As(err, &readErr) && readErr.Timeout():
		return fmt.Errorf("%w: %w", errBodyTimeout, err)
	case readErr != nil:
		return fmt.Errorf("%w: %w", bodyError("could not be read"), err)
	case errors.Is(err, io.EOF):
		return bodyError("empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bodyError("malformed JSON: unexpected end of input")
	case errors.As(err, &synErr):
		return bodyError("malformed JSON at byte %d", synErr.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return bodyError("must be a JSON object, not %s", typeErr.Value)
		}
		return domain.NewFieldError(typeErr.Field, fmt.Errorf("must be %s, not %s", kindName(typeErr.Type), typeErr.Value))
	}
	// encoding/json reports an unknown field only as an error string.
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		name, uerr := strconv.Unquote(strings.TrimPrefix(msg, "json: unknown field "))
		if uerr != nil {
			name = strings.TrimPrefix(msg, "json: unknown field ")
		}
		return bodyError("unknown field %q", name)
	}
	return bodyError("malformed JSON: %v", err)
}

func kindName(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	}
	return "a " + t.Kind().String()
}

// decodeDeduct reads a deduct body for sku and validates every field with
// the domain's own validators, in the order sku, user_id, qty, request_id.
// The command it returns holds the validated domain values. An
// Idempotency-Key header stands for a missing request_id, and must equal
// one that is given.
func decodeDeduct(sku, idempotencyKey string, body io.Reader) (ledger.DeductCommand, error) {
	var b apiwire.DeductBody
	err := decodeJSON(body, &b)
	if err != nil {
		return ledger.DeductCommand{}, err
	}
	if b.RequestID, err = purchaseRequestID(b.RequestID, idempotencyKey); err != nil {
		return ledger.DeductCommand{}, err
	}
	if b.Qty == nil {
		// A missing qty ranks after sku and user_id, like any bad qty. Only
		// this error path checks those two apart from NewDeductCommand.
		if _, err := domain.NewSKUID(sku); err != nil {
			return ledger.DeductCommand{}, err
		}
		if _, err := domain.NewUserID(b.UserID); err != nil {
			return ledger.DeductCommand{}, err
		}
		return ledger.DeductCommand{}, domain.NewFieldError("qty", errors.New("is required"))
	}
	return ledger.NewDeductCommand(sku, b.UserID, *b.Qty, b.RequestID)
}

// purchaseRequestID is the request id of a purchase or reserve: the body's
// request_id, or the Idempotency-Key header standing for a missing one; when
// both are given they must be equal.
func purchaseRequestID(bodyID, idempotencyKey string) (string, error) {
	switch {
	case bodyID == "":
		return idempotencyKey, nil
	case idempotencyKey != "" && idempotencyKey != bodyID:
		return "", domain.NewFieldError(apiwire.HeaderIdempotencyKey, errors.New("must equal the body's request_id when both are given"))
	}
	return bodyID, nil
}

// decodeRelease reads a release body for sku and validates every field.
func decodeRelease(sku string, body io.Reader) (ledger.ReleaseCommand, error) {
	var b apiwire.ReleaseBody
	if err := decodeJSON(body, &b); err != nil {
		return ledger.ReleaseCommand{}, err
	}
	return ledger.NewReleaseCommand(sku, b.UserID, b.RequestID, b.Reason)
}

// decodeCreateSKU reads a create body for sku. stock is required;
// per_user_limit defaults to 1 when absent, and an explicit 0 is refused
// (the service would otherwise read it as "absent").
func decodeCreateSKU(sku string, body io.Reader) (ledger.CreateSKUCommand, error) {
	var b apiwire.CreateSKUBody
	if err := decodeJSON(body, &b); err != nil {
		return ledger.CreateSKUCommand{}, err
	}
	cmd := ledger.CreateSKUCommand{SKU: sku, PerUserLimit: 1}
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return cmd, err
	}
	if b.Stock == nil {
		return cmd, domain.NewFieldError("stock", errors.New("is required"))
	}
	cmd.Stock = *b.Stock
	if b.PerUserLimit != nil {
		cmd.PerUserLimit = *b.PerUserLimit
	}
	if _, err := domain.NewSKUDefinition(id, cmd.Stock, cmd.PerUserLimit); err != nil {
		return cmd, err
	}
	return cmd, nil
}
