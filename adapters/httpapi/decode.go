package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// DefaultMaxBodyBytes is the largest request body accepted: a larger one
// gets 400 and writes nothing.
const DefaultMaxBodyBytes = 64 << 10

// Request bodies. Pointers tell a missing field from a zero one.
type (
	createSKUBody struct {
		Stock        *int64 `json:"stock"`
		PerUserLimit *int64 `json:"per_user_limit"`
	}
	deductBody struct {
		UserID    string `json:"user_id"`
		Qty       *int64 `json:"qty"`
		RequestID string `json:"request_id"`
	}
	releaseBody struct {
		UserID    string `json:"user_id"`
		RequestID string `json:"request_id"`
		Reason    string `json:"reason"`
	}
)

// bodyError is a *domain.FieldError for the request body as a whole, so
// every decoding failure maps to 400 invalid_request like field errors do.
func bodyError(format string, args ...any) error {
	return domain.NewFieldError("body", fmt.Errorf(format, args...))
}

// decodeJSON reads exactly one JSON object from body into dst. body should be
// an http.MaxBytesReader: exceeding it is reported as a body error. Unknown
// fields, trailing data, an empty body and a value of the wrong type are all
// refused, with an error that names the field at fault.
func decodeJSON(body io.Reader, dst any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return translateJSONError(err)
	}
	// Anything but whitespace after the object is refused. Reading to EOF
	// also makes the size limit apply to what follows the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var (
			tooBig  *http.MaxBytesError
			readErr net.Error
		)
		if errors.As(err, &tooBig) || errors.As(err, &readErr) {
			return translateJSONError(err)
		}
		return bodyError("unexpected data after the JSON object")
	}
	return nil
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
// The command it returns holds the validated domain values.
func decodeDeduct(sku string, body io.Reader) (ledger.DeductCommand, error) {
	var b deductBody
	if err := decodeJSON(body, &b); err != nil {
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

// decodeRelease reads a release body for sku and validates every field.
func decodeRelease(sku string, body io.Reader) (ledger.ReleaseCommand, error) {
	var b releaseBody
	if err := decodeJSON(body, &b); err != nil {
		return ledger.ReleaseCommand{}, err
	}
	return ledger.NewReleaseCommand(sku, b.UserID, b.RequestID, b.Reason)
}

// decodeCreateSKU reads a create body for sku. stock is required;
// per_user_limit defaults to 1 when absent, and an explicit 0 is refused
// (the service would otherwise read it as "absent").
func decodeCreateSKU(sku string, body io.Reader) (ledger.CreateSKUCommand, error) {
	var b createSKUBody
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
