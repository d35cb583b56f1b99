package domain

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Order defaults.
const DefaultOrderMaxLines = 20

// Refusals of an order's shape. Each is a FieldError naming "lines" or the
// line at fault, so bad input changes nothing and says what to fix.
var (
	// ErrEmptyOrder is an order without lines.
	ErrEmptyOrder = errors.New("must list at least one line")
	// ErrTooManyLines is an order with more lines than the configured maximum.
	ErrTooManyLines = errors.New("has more lines than the maximum")
	// ErrDuplicateSKU is a SKU named by two lines of one order: one line per
	// SKU, so each line's hold id follows from the order id and the SKU.
	ErrDuplicateSKU = errors.New("names a sku that an earlier line already names")
	// ErrInvalidOrderID is an order id that is empty, not 1-128 printable
	// characters, or not a URL path segment (pathSegmentable).
	ErrInvalidOrderID = errors.New("must be 1-128 printable characters, not only dots nor a single /")
)

// OrderConfig bounds the orders a deployment accepts.
type OrderConfig struct {
	// MaxLines is the most lines one order may have. Default DefaultOrderMaxLines.
	MaxLines int
}

// SetDefaults fills the unset fields.
func (c *OrderConfig) SetDefaults() {
	if c.MaxLines == 0 {
		c.MaxLines = DefaultOrderMaxLines
	}
}

// Validate reports every invalid setting at once.
func (c OrderConfig) Validate() error {
	var errs []error
	if c.MaxLines < 1 || c.MaxLines > 1000 {
		errs = append(errs, fmt.Errorf("orders: MaxLines must be from 1 to 1000, got %d", c.MaxLines))
	}
	return errors.Join(errs...)
}

// CheckLineCount refuses an order of n lines that is empty or longer than
// c.MaxLines, naming the field "lines".
func (c OrderConfig) CheckLineCount(n int) error {
	switch {
	case n == 0:
		return NewFieldError("lines", ErrEmptyOrder)
	case n > c.MaxLines:
		return NewFieldError("lines", fmt.Errorf("%w (%d), got %d", ErrTooManyLines, c.MaxLines, n))
	}
	return nil
}

// OrderID is the caller's id of an order, and its idempotency key: 1-128
// printable characters, pathSegmentable, as its routes name it.
type OrderID struct{ v string }

// NewOrderID validates s as an order id, a FieldError on "order_id".
func NewOrderID(s string) (OrderID, error) {
	if !isPrintableID(s, maxIDLen) || !pathSegmentable(s) {
		return OrderID{}, NewFieldError("order_id", ErrInvalidOrderID)
	}
	return OrderID{v: s}, nil
}

// String returns the id as given.
func (o OrderID) String() string { return o.v }

// orderNamespace is the UUID namespace of order lines' request ids.
var orderNamespace = uuid.MustParse("3b0f6c52-8d1e-4a7b-b6f0-0c9e2d4a5f13")

// LineRequestID is the request id of the reserve of sku's line of order: a
// UUID of both, so a retried order reserves with the same request ids and
// names the same holds (HoldIDFor).
func (o OrderID) LineRequestID(sku SKUID) RequestID {
	return RequestID{v: "order-" + uuid.NewSHA1(orderNamespace, []byte(o.v+"\x00"+sku.String())).String()}
}

// OrderStatus is an order's state, derived from its lines' holds: an order
// keeps no state of its own.
type OrderStatus string

// The order states.
const (
	// OrderHeld: every line is held.
	OrderHeld OrderStatus = "held"
	// OrderConfirmed: every line is confirmed.
	OrderConfirmed OrderStatus = "confirmed"
	// OrderCancelled: no line is held or confirmed, and none expired: each
	// was cancelled, never reserved, or released (its sale given back).
	OrderCancelled OrderStatus = "cancelled"
	// OrderExpired: no line is held or confirmed, and one expired.
	OrderExpired OrderStatus = "expired"
	// OrderPartial: the lines are in different states, while a place,
	// confirm or cancel runs, or after one was cut short (retrying it
	// finishes it; otherwise the lines still held expire), or once some
	// confirmed lines' sales were released and others stand.
	OrderPartial OrderStatus = "partial"
)

// OrderStatusOf derives an order's state from its lines' holds: every
// answer about an order, whichever call gives it, comes from here. A line
// never reserved (a place cut short) has status "". A released line
// counts as cancelled: its units are back on sale.
func OrderStatusOf(lines []HoldStatus) OrderStatus {
	count := map[HoldStatus]int{}
	for _, s := range lines {
		count[s]++
	}
	switch {
	case count[HoldHeld] == len(lines):
		return OrderHeld
	case count[HoldConfirmed] == len(lines):
		return OrderConfirmed
	case count[HoldHeld] > 0 || count[HoldConfirmed] > 0:
		return OrderPartial
	case count[HoldExpired] > 0:
		return OrderExpired
	}
	return OrderCancelled
}

// OrderError is a refusal of an order that names the member of the order
// at fault: a line ("lines[2]") refused by its reserve or confirm, or a
// member of a retried order that differs from the first. It matches the
// refusal it wraps (ErrSoldOut, ErrHoldExpired, ErrConflict...), and is not
// an input error: the order was well formed.
type OrderError struct {
	Field string
	Err   error
}

// Error names the field first.
func (e *OrderError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

// Unwrap returns the refusal.
func (e *OrderError) Unwrap() error { return e.Err }

// LineError returns the refusal of line i, of sku, by err. A FieldError
// (a quantity over the per-user limit) stays one, its field under the line's
// ("lines[1].qty").
func LineError(i int, sku string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return NewFieldError(fmt.Sprintf("lines[%d].%s", i, fe.Field), fmt.Errorf("line %d (sku %s): %w", i, sku, fe.Err))
	}
	return &OrderError{Field: fmt.Sprintf("lines[%d]", i), Err: fmt.Errorf("line %d (sku %s): %w", i, sku, err)}
}
