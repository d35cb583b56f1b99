package httpapi

import (
	"bytes"
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
	"unicode/utf8"

	"github.com/invledger/invledger/adapters/wire"
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
// field at fault. So are the things encoding/json lets through, in nested
// objects (order lines) as at the top: a key given twice (it would keep the
// last value), a key that matches a field only case-insensitively
// ({"QTY":3}), a null (it would read as "absent"), a body that is null
// rather than an object, and bytes that are not UTF-8 (they would become
// U+FFFD, so two distinct ids would read as one).
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
			err = checkBody(rec.buf, jsonKeysOf(reflect.TypeOf(dst)))
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

// objectKeys are the json keys of a request struct, in field order, and
// for each key the objectKeys of its value when that is an object or an
// array of objects (nil for any other value).
type objectKeys struct {
	names  []string
	nested []*objectKeys
}

// jsonKeyCache maps a request struct type to its objectKeys, collected once.
var jsonKeyCache sync.Map // reflect.Type → *objectKeys

// jsonKeysOf returns the objectKeys of the struct t is or points to (nil
// when it is not a struct): each field's json tag name, or its Go name when
// it has none.
func jsonKeysOf(t reflect.Type) *objectKeys {
	if v, ok := jsonKeyCache.Load(t); ok {
		return v.(*objectKeys)
	}
	st := t
	for st.Kind() == reflect.Pointer || st.Kind() == reflect.Slice || st.Kind() == reflect.Array {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct || reflect.PointerTo(st).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	keys := &objectKeys{}
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
		keys.names = append(keys.names, name)
		keys.nested = append(keys.nested, jsonKeysOf(f.Type))
	}
	if len(keys.names) > 64 {
		panic("httpapi: request struct " + st.String() + " has more than 64 json keys") // a programming error
	}
	v, _ := jsonKeyCache.LoadOrStore(t, keys)
	return v.(*objectKeys)
}

// checkBody refuses what encoding/json accepted in data (one valid JSON
// value) but a request must not hold: a body that is not an object, and in
// the object and in the nested objects keys describes, a key that is not
// exactly one of keys or that is given twice, a null, or a string that is
// not valid UTF-8. The error names the field at fault, as lines[1].qty.
func checkBody(data []byte, keys *objectKeys) error {
	sc := keyScanner{data: data, checkUTF8: !utf8.Valid(data)}
	sc.space()
	if !sc.is('{') {
		return bodyError("must be a JSON object")
	}
	if err := sc.object(keys, ""); err != nil {
		return err
	}
	if sc.checkUTF8 {
		return bodyError("is not valid UTF-8") // not met in a string: cannot happen
	}
	return sc.err
}

// object checks the object at s.i against keys and consumes it; path is
// the field the object is the value of ("" at the top).
func (s *keyScanner) object(keys *objectKeys, path string) error {
	s.i++ // '{'
	var seen uint64
	for {
		s.space()
		if s.is(',') {
			s.i++
			s.space()
		}
		if !s.is('"') {
			s.i++ // '}'
			return s.err
		}
		raw, escaped := s.str()
		if s.badUTF8 {
			return bodyError("a key is not valid UTF-8")
		}
		if escaped {
			// Rare: a key spelt with escapes; compare what it decodes to.
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return bodyError("malformed JSON: %v", err)
			}
			raw = []byte(name)
		} else {
			raw = raw[1 : len(raw)-1]
		}
		k := slices.Index(keys.names, string(raw))
		field := string(raw)
		if path != "" {
			field = path + "." + field
		}
		switch {
		case k < 0:
			for _, name := range keys.names {
				if strings.EqualFold(string(raw), name) {
					return bodyError("unknown field %q: keys are case-sensitive, this one is %q", field, name)
				}
			}
			return bodyError("unknown field %q", field)
		case seen&(1<<k) != 0:
			return domain.NewFieldError(field, errors.New("is given more than once"))
		}
		seen |= 1 << k
		s.space()
		s.i++ // ':'
		s.space()
		if err := s.value(keys.nested[k], field); err != nil {
			return err
		}
	}
}

// value checks the value at s.i, the one of field, and consumes it: an
// object or the objects of an array against nested when it is not nil.
func (s *keyScanner) value(nested *objectKeys, field string) error {
	switch {
	case s.is('n'):
		return domain.NewFieldError(field, errors.New("must not be null: leave the field out instead"))
	case nested != nil && s.is('{'):
		return s.object(nested, field)
	case nested != nil && s.is('['):
		s.i++
		for n := 0; ; n++ {
			s.space()
			if s.is(',') {
				s.i++
				s.space()
			}
			if !s.is('{') && !s.is('n') {
				break
			}
			if err := s.value(nested, field+"["+strconv.Itoa(n)+"]"); err != nil {
				return err
			}
		}
	}
	s.skipValue()
	if s.badUTF8 {
		return domain.NewFieldError(field, errors.New("is not valid UTF-8"))
	}
	return s.err
}

// keyScanner walks JSON that encoding/json already validated. Out of range
// reads stop it with an error instead of panicking. With checkUTF8 set, a
// string that is not valid UTF-8 sets badUTF8.
type keyScanner struct {
	data      []byte
	i         int
	err       error
	checkUTF8 bool
	badUTF8   bool
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
			raw = s.data[start:s.i]
			if s.checkUTF8 && !utf8.Valid(raw) {
				s.badUTF8 = true
			}
			return raw, escaped
		}
		s.i++
	}
	s.err = bodyError("malformed JSON: unexpected end of input")
	return s.data[start:], escaped
}

// skipValue consumes one value: a string, a nested object or array, or a
// literal or number; or, at the end of an array, its closing bracket.
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
				if c == ']' {
					s.i++ // the end of an array value walks stopped in
				}
				return // or the end of the enclosing object
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

// errBodyTimeout is a request body that did not arrive before the
// connection's read deadline: 408, not the caller's malformed JSON.
var errBodyTimeout = errors.New("the request body did not arrive in time")

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
// The command it returns holds the validated domain values.
//
// Idempotency-Key has two uses, one per kind of write: on a purchase, here,
// it is another name for the body's request_id, the purchase's own key,
// which Redis remembers with the receipt; on a write without a natural key
// it is a claim stored with the first answer (idempotent). So the header
// stands for a missing request_id, and must equal one that is given.
func decodeDeduct(sku, idempotencyKey string, body io.Reader) (ledger.DeductCommand, error) {
	var b wire.DeductBody
	given, err := decodeDeductBody(body, &b)
	if err != nil {
		return ledger.DeductCommand{}, err
	}
	if b.RequestID, err = purchaseRequestID(b.RequestID, given, idempotencyKey); err != nil {
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

// decodeDeductBody decodes a deduct body into dst as decodeJSON does, and
// reports whether it gave request_id (decodePurchaseBody). The body
// gateways send, ASCII strings without escapes and an integer qty, is
// parsed by parseDeductBody without reflection; any other body goes
// through decodePurchaseBody, so every refusal keeps its wording.
func decodeDeductBody(body io.Reader, dst *wire.DeductBody) (requestIDGiven bool, err error) {
	bp := getBuf()
	data, rerr := readAll((*bp)[:0], body)
	defer putBuf(bp, data)
	if rerr == nil && parseDeductBody(data, dst) && dst.RequestID != "" {
		return true, nil
	}
	*dst = wire.DeductBody{}
	return decodePurchaseBody(data, rerr, dst, &dst.RequestID)
}

// decodePurchaseBody decodes data, a purchase's or a reserve's body as read
// until the read error rerr, into dst as decodeJSON does (a body that could
// not be read whole is refused as decodeJSON refuses it), and reports
// whether the body gave request_id, which *requestID, dst's member, cannot
// say when it is empty: an empty request_id is refused, an absent one
// stands for the Idempotency-Key header (purchaseRequestID).
func decodePurchaseBody(data []byte, rerr error, dst any, requestID *string) (requestIDGiven bool, err error) {
	var r io.Reader = bytes.NewReader(data)
	if rerr != nil {
		r = io.MultiReader(r, errReader{rerr})
	}
	if err := decodeJSON(r, dst); err != nil {
		return false, err
	}
	if *requestID != "" {
		return true, nil
	}
	var given struct {
		RequestID *string `json:"request_id"`
	}
	_ = json.Unmarshal(data, &given) // decodeJSON read it
	return given.RequestID != nil, nil
}

// readAll appends what r holds to b, like io.ReadAll into a buffer of the
// caller's.
func readAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
	}
}

// errReader fails every read with err: the failure a body's reader met,
// replayed after what it had read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// parseDeductBody reports whether data is a deduct body decodeJSON would
// accept, spelt plainly, and if so fills dst as decodeJSON would: one
// object of the keys user_id, qty and request_id, each at most once, whose
// strings are ASCII without escapes and whose qty is an integer of at most
// 18 digits without a leading zero. false leaves dst partly filled, and
// says nothing about whether decodeJSON accepts data.
func parseDeductBody(data []byte, dst *wire.DeductBody) bool {
	p := plainJSON{data: data}
	if !p.next('{') {
		return false
	}
	var seen [3]bool
	for {
		key, ok := p.str()
		if !ok || !p.next(':') {
			return false
		}
		var k int
		switch string(key) {
		case "user_id":
			v, ok := p.str()
			if !ok {
				return false
			}
			dst.UserID, k = string(v), 0
		case "qty":
			v, ok := p.int()
			if !ok {
				return false
			}
			dst.Qty, k = &v, 1
		case "request_id":
			v, ok := p.str()
			if !ok {
				return false
			}
			dst.RequestID, k = string(v), 2
		default:
			return false
		}
		if seen[k] {
			return false
		}
		seen[k] = true
		if p.next('}') {
			p.space()
			return p.i == len(p.data)
		}
		if !p.next(',') {
			return false
		}
	}
}

// plainJSON reads the plain spelling parseDeductBody accepts; every method
// skips the whitespace before what it reads and reports false at anything
// else.
type plainJSON struct {
	data []byte
	i    int
}

func (p *plainJSON) space() {
	for p.i < len(p.data) && (p.data[p.i] == ' ' || p.data[p.i] == '\t' || p.data[p.i] == '\n' || p.data[p.i] == '\r') {
		p.i++
	}
}

// next consumes the byte c.
func (p *plainJSON) next(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str consumes a string of printable ASCII without escapes and returns
// its contents.
func (p *plainJSON) str() ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			return p.data[start : p.i-1], true
		case c < ' ' || c == '\\' || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// int consumes an integer of 1-18 digits, negative or not, without a
// leading zero, fraction or exponent: one that fits an int64 as it is.
func (p *plainJSON) int() (int64, bool) {
	p.space()
	neg := p.i < len(p.data) && p.data[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		n = n*10 + int64(p.data[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (p.data[start] == '0' && (digits > 1 || neg)) {
		return 0, false
	}
	if p.i < len(p.data) && (p.data[p.i] == '.' || p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// purchaseRequestID is the request id of a purchase or reserve: the body's
// request_id, or the Idempotency-Key header standing for a missing one; when
// both are given they must be equal. A request_id given empty is refused
// as any invalid one, header or not: the description says 1-128 characters.
func purchaseRequestID(bodyID string, given bool, idempotencyKey string) (string, error) {
	switch {
	case bodyID == "" && given:
		_, err := domain.NewRequestID(bodyID)
		return "", err
	case bodyID == "":
		return idempotencyKey, nil
	case idempotencyKey != "" && idempotencyKey != bodyID:
		return "", domain.NewFieldError(wire.HeaderIdempotencyKey, errors.New("must equal the body's request_id when both are given"))
	}
	return bodyID, nil
}

// decodeRelease reads a release body for sku and validates every field.
func decodeRelease(sku string, body io.Reader) (ledger.ReleaseCommand, error) {
	var b wire.ReleaseBody
	if err := decodeJSON(body, &b); err != nil {
		return ledger.ReleaseCommand{}, err
	}
	return ledger.NewReleaseCommand(sku, b.UserID, b.RequestID, b.Reason)
}

// decodeCreateSKU reads a create body for sku. stock is required;
// per_user_limit defaults to 1 when absent, and an explicit 0 is refused
// (the service would otherwise read it as "absent").
func decodeCreateSKU(sku string, body io.Reader) (ledger.CreateSKUCommand, error) {
	var b wire.CreateSKUBody
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
