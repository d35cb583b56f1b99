package domain

import (
	"errors"
	"fmt"
)

// Outcome errors of a purchase attempt. They live beside the rules that raise
// them; CodeOf classifies them, and adapters map its codes to HTTP statuses,
// exit statuses and metric labels.
var (
	// ErrSoldOut means the SKU has less available stock than the requested quantity.
	ErrSoldOut = errors.New("sold out")
	// ErrAlreadyPurchased means the user already holds the per-user limit.
	ErrAlreadyPurchased = errors.New("already purchased")
	// ErrNotWarmed means the SKU exists but its stock is not loaded into Redis.
	ErrNotWarmed = errors.New("not warmed")
	// ErrNotFound means the SKU, or the deduction named by a request id, does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request contradicts what is already recorded: a SKU
	// redefined with other values, or a request id reused for another purchase.
	ErrConflict = errors.New("conflict")
	// ErrClosed means the SKU was closed and accepts no more deductions.
	ErrClosed = errors.New("closed")
	// ErrRetired means the SKU was retired: its sale ended and Redis no
	// longer holds it. Releases need it restored into Redis first.
	ErrRetired = errors.New("retired")
	// ErrRecovering means Redis has not yet been verified against the ledger
	// since it restarted; the caller should retry shortly.
	ErrRecovering = errors.New("recovering")
	// ErrNeedsRestore means the ledger already holds events for a SKU whose
	// Redis state is gone. Stocking it again would double its stock, so the
	// operator must run restore-redis instead.
	ErrNeedsRestore = errors.New("redis lost this sku's state; run `invledger restore-redis`")
	// ErrUnavailable means a server the operation needs (Redis or
	// PostgreSQL) did not answer: nothing is wrong with the request, and
	// the caller retries it, with the same request id.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnsafeRedis means Redis is configured so that it could lose or
	// evict sales data (persistence off, or an eviction policy that may drop
	// keys), so sales are stopped until the setting is safe again; the
	// caller retries later, with the same request id.
	ErrUnsafeRedis = errors.New("redis settings are unsafe")
	// ErrCorruptLedger means a SKU's events do not fold into a consistent state.
	ErrCorruptLedger = errors.New("corrupt ledger")
	// ErrCorruptRecord means what Redis keeps for this request (a receipt,
	// a hold record) or for its SKU (the SKU's state, a key of its
	// partition) does not read, so the outcome cannot be judged; the
	// attempt wrote nothing. It matches ErrUnavailable: what is corrupt is
	// rebuilt from the ledger, and a retry with the same request id then
	// gets the outcome it would have had.
	ErrCorruptRecord = fmt.Errorf("%w: what redis keeps for this request or its sku is corrupt and is being rebuilt from the ledger", ErrUnavailable)
)

// ErrInvalidInput is matched by every validation failure, whichever field failed.
var ErrInvalidInput = errors.New("invalid input")

// Field-specific validation errors. Each one also matches ErrInvalidInput
// once a FieldError names its field, so none of them repeats it: the HTTP
// API answers the field in its own member, and FieldError.Error prefixes it.
var (
	ErrInvalidSKU        = errors.New("must be 1-64 characters of A-Z a-z 0-9 . _ : -")
	ErrInvalidUser       = errors.New("must be 1-128 printable characters")
	ErrInvalidRequestID  = errors.New("must be 1-128 printable characters")
	ErrInvalidQuantity   = errors.New("must be a positive integer")
	ErrInvalidStock      = errors.New("must be a non-negative integer")
	ErrInvalidLimit      = errors.New("must be a positive integer")
	ErrQuantityOverLimit = errors.New("exceeds the sku's per-user limit")
	ErrInvalidReason     = errors.New("must be at most 256 printable characters")
)

// Finer refusals of an id, each also matching the sentinel of its field.
var (
	ErrSKUOnlyDots      = fmt.Errorf("%w, not only dots", ErrInvalidSKU)
	ErrUserIDWhitespace = fmt.Errorf("%w, without leading or trailing whitespace (ids are never trimmed)", ErrInvalidUser)
	ErrUserIDNotNFC     = fmt.Errorf("%w, in Unicode NFC: send canonical ids, they are never normalized", ErrInvalidUser)
	ErrUserIDNoPath     = fmt.Errorf("%w, not only dots nor a single /: it could not be a URL path segment", ErrInvalidUser)
	// ErrMissingRequestID says why an absent request id is needed, rather
	// than how a present one must look.
	ErrMissingRequestID error = refinement{"is required: it is the idempotency key that makes a retry safe, never buying twice", ErrInvalidRequestID}
	// ErrMissingReason is an adjustment's empty reason: its audit trail
	// must say why the stock changed.
	ErrMissingReason error = refinement{"is required: the audit trail says why the stock changed", ErrInvalidReason}
)

// refinement is a finer refusal with its own text that still matches the
// sentinel of its field.
type refinement struct {
	msg    string
	parent error
}

func (r refinement) Error() string { return r.msg }
func (r refinement) Unwrap() error { return r.parent }

// FieldError reports which input field failed validation and why. It matches
// ErrInvalidInput and its own cause with errors.Is.
type FieldError struct {
	Field string
	Err   error
}

// Error names the field first, so the message alone tells the caller what to fix.
func (e *FieldError) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

// Unwrap exposes both the generic and the specific sentinel.
func (e *FieldError) Unwrap() []error { return []error{ErrInvalidInput, e.Err} }

// NewFieldError builds a FieldError for field with the given cause.
func NewFieldError(field string, err error) error { return &FieldError{Field: field, Err: err} }
