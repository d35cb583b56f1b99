package domain

import (
	"context"
	"errors"
)

// Code names the outcome of an operation in the words of the public
// contract: the "error" field of an HTTP error body, the metrics' outcome
// label and the class behind the CLI's exit status. Every adapter derives
// its own mapping from CodeOf, so no adapter keeps a list of sentinels.
type Code string

// The codes. CodeOK is the outcome of a nil error.
const (
	CodeOK                Code = "ok"
	CodeInvalidInput      Code = "invalid_request"
	CodeNotFound          Code = "not_found"
	CodeSelfApproval      Code = "self_approval"
	CodeInsufficientStock Code = "insufficient_stock"
	CodeSoldOut           Code = "sold_out"
	CodeAlreadyPurchased  Code = "already_purchased"
	CodeNotWarmed         Code = "not_warmed"
	CodeClosed            Code = "closed"
	CodeRetired           Code = "retired"
	CodeNeedsRestore      Code = "needs_restore"
	CodeConflict          Code = "conflict"
	CodeRecovering        Code = "recovering"
	CodeHoldExpired       Code = "hold_expired"
	CodeHoldConfirmed     Code = "hold_confirmed"
	CodeHoldCancelled     Code = "hold_cancelled"
	CodeHoldReleased      Code = "hold_released"
	// CodeUnavailable is a server that did not answer, or not in time; the
	// caller retries with the same request id.
	CodeUnavailable Code = "unavailable"
	// CodeUnsafeRedis is a Redis whose persistence or eviction settings
	// could lose sales: sales stop until an operator fixes them.
	CodeUnsafeRedis   Code = "unsafe_redis"
	CodeCorruptLedger Code = "corrupt_ledger"
	// CodeInternal is every error that matches no sentinel: a failure of
	// the infrastructure or a bug, never the caller's doing.
	CodeInternal Code = "internal"
)

// codes is checked in order with errors.Is; the first match wins. Input
// errors come first: a *FieldError is always the caller's fault, whatever
// else it wraps. ErrConflict comes after the more specific refusals, since
// several of them (the ledger's own refusals among them) wrap it.
var codes = []struct {
	sentinel error
	code     Code
}{
	{ErrInvalidInput, CodeInvalidInput},
	{ErrNotFound, CodeNotFound},
	{ErrSelfApproval, CodeSelfApproval},
	{ErrInsufficientStock, CodeInsufficientStock},
	{ErrSoldOut, CodeSoldOut},
	{ErrAlreadyPurchased, CodeAlreadyPurchased},
	{ErrNotWarmed, CodeNotWarmed},
	{ErrHoldExpired, CodeHoldExpired},
	{ErrHoldConfirmed, CodeHoldConfirmed},
	{ErrHoldCancelled, CodeHoldCancelled},
	{ErrHoldReleased, CodeHoldReleased},
	{ErrClosed, CodeClosed},
	{ErrRetired, CodeRetired},
	{ErrNeedsRestore, CodeNeedsRestore},
	{ErrConflict, CodeConflict},
	{ErrRecovering, CodeRecovering},
	{ErrUnsafeRedis, CodeUnsafeRedis},
	{ErrUnavailable, CodeUnavailable},
	{context.DeadlineExceeded, CodeUnavailable},
	{ErrCorruptLedger, CodeCorruptLedger},
}

// CodeOf classifies err: CodeOK for nil, the code of the first sentinel of
// the table that err matches, and CodeInternal otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	for _, c := range codes {
		if errors.Is(err, c.sentinel) {
			return c.code
		}
	}
	return CodeInternal
}
