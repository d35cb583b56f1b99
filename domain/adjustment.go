package domain

import (
	"errors"
	"strings"
	"time"
)

// ErrSelfApproval means the approver of an adjustment is the person who
// requested it. Every manual stock change needs a second person.
var ErrSelfApproval = errors.New("an adjustment cannot be approved or rejected by its requester")

// ErrInsufficientStock means a negative adjustment would take stock below zero.
var ErrInsufficientStock = errors.New("the adjustment would take stock below zero")

// ErrInvalidDelta and ErrInvalidActor are the adjustment field errors.
var (
	ErrInvalidDelta = errors.New("must be a non-zero integer within ±1000000000")
	ErrInvalidActor = errors.New("the requester and approver must be named")
)

// AdjustmentStatus is where an adjustment is in its approval flow.
type AdjustmentStatus string

const (
	AdjustmentPending  AdjustmentStatus = "pending"
	AdjustmentApproved AdjustmentStatus = "approved"
	AdjustmentRejected AdjustmentStatus = "rejected"
	AdjustmentApplied  AdjustmentStatus = "applied"
	AdjustmentFailed   AdjustmentStatus = "failed"
)

// ParseAdjustmentStatus validates s as a status.
func ParseAdjustmentStatus(s string) (AdjustmentStatus, error) {
	switch st := AdjustmentStatus(s); st {
	case AdjustmentPending, AdjustmentApproved, AdjustmentRejected, AdjustmentApplied, AdjustmentFailed:
		return st, nil
	}
	return "", NewFieldError("status", errors.New("must be pending, approved, rejected, applied or failed"))
}

// AdjustmentRequest is a validated request for a manual stock change.
type AdjustmentRequest struct {
	sku         SKUID
	delta       int64
	reason      Reason
	requestedBy string
}

// NewAdjustmentRequest validates a request: a real SKU, a non-zero delta, a
// reason (required: the audit trail must say why) and a named requester.
func NewAdjustmentRequest(sku string, delta int64, reason, requestedBy string) (AdjustmentRequest, error) {
	id, err := NewSKUID(sku)
	if err != nil {
		return AdjustmentRequest{}, err
	}
	if delta == 0 || delta > MaxQuantity || delta < -MaxQuantity {
		return AdjustmentRequest{}, NewFieldError("delta", ErrInvalidDelta)
	}
	r, err := NewReason(reason)
	if err != nil {
		return AdjustmentRequest{}, err
	}
	if r.String() == "" {
		return AdjustmentRequest{}, NewFieldError("reason", ErrMissingReason)
	}
	if requestedBy == "" {
		return AdjustmentRequest{}, NewFieldError("requested_by", ErrInvalidActor)
	}
	return AdjustmentRequest{sku: id, delta: delta, reason: r, requestedBy: requestedBy}, nil
}

// SKU returns the SKU to adjust.
func (r AdjustmentRequest) SKU() SKUID { return r.sku }

// Delta returns the signed change to available stock.
func (r AdjustmentRequest) Delta() int64 { return r.delta }

// Reason returns why.
func (r AdjustmentRequest) Reason() string { return r.reason.String() }

// RequestedBy names the requester.
func (r AdjustmentRequest) RequestedBy() string { return r.requestedBy }

// Adjustment is a stored adjustment and where its approval stands.
type Adjustment struct {
	ID          int64
	SKU         string
	Delta       int64
	Reason      string
	RequestedBy string
	RequestedAt time.Time
	Status      AdjustmentStatus
	DecidedBy   *string
	DecidedAt   *time.Time
	EventID     *string
	Seq         *int64
	Result      *string
	// ReconciliationRunID links the reconciliation that ran right after the
	// adjustment was applied.
	ReconciliationRunID *int64
}

// SamePerson reports whether two principal names name one person. Names
// are compared case-folded: "Alice" approving what "alice" requested is
// self-approval.
func SamePerson(a, b string) bool { return strings.EqualFold(a, b) }

// AdjustActor is the actor recorded on an adjusted event: both people.
func AdjustActor(requestedBy, approvedBy string) string {
	return "requested_by=" + requestedBy + ";approved_by=" + approvedBy
}
