package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/invledger/invledger/domain"
)

// AdjustmentStore keeps adjustments and their approval state.
type AdjustmentStore interface {
	Create(ctx context.Context, r domain.AdjustmentRequest) (domain.Adjustment, error)
	Get(ctx context.Context, id int64) (domain.Adjustment, error)
	Decide(ctx context.Context, id int64, status domain.AdjustmentStatus, decidedBy, eventID string) (domain.Adjustment, bool, error)
	Finish(ctx context.Context, id int64, status domain.AdjustmentStatus, seq *int64, result string) (domain.Adjustment, error)
	LinkReconciliation(ctx context.Context, id, runID int64) (domain.Adjustment, error)
	List(ctx context.Context, status domain.AdjustmentStatus, sku string, limit int) ([]domain.Adjustment, error)
}

// StockAdjuster applies an approved adjustment to live stock, once per id.
type StockAdjuster interface {
	Adjust(ctx context.Context, sku domain.SKUID, adjustmentID, delta int64, eventID, actor, reason string) (domain.Receipt, error)
}

// SKUReconciler reconciles one SKU, with repair, and returns the run's id.
type SKUReconciler func(ctx context.Context, sku string) (runID int64, err error)

// Adjustments is the approval flow for manual stock changes: the only way
// stock changes by hand. A request changes nothing; a second person's
// approval applies it through Redis, appends an adjusted event naming both
// people, and reconciles the SKU at once.
type Adjustments struct {
	store     AdjustmentStore
	stock     StockAdjuster
	reconcile SKUReconciler
	log       *slog.Logger
}

// NewAdjustments wires the flow.
func NewAdjustments(store AdjustmentStore, stock StockAdjuster, reconcile SKUReconciler, log *slog.Logger) *Adjustments {
	return &Adjustments{store: store, stock: stock, reconcile: reconcile, log: log}
}

// Request records a pending adjustment by requestedBy.
func (a *Adjustments) Request(ctx context.Context, sku string, delta int64, reason, requestedBy string) (domain.Adjustment, error) {
	r, err := domain.NewAdjustmentRequest(sku, delta, reason, requestedBy)
	if err != nil {
		return domain.Adjustment{}, err
	}
	return a.store.Create(ctx, r)
}

// Approve applies adjustment id on behalf of approver, who must not be its
// requester (domain.ErrSelfApproval). Approving again returns the same
// result and never applies twice. A change that would take stock below
// zero marks the adjustment failed and returns domain.ErrInsufficientStock.
func (a *Adjustments) Approve(ctx context.Context, id int64, approver string) (domain.Adjustment, error) {
	adj, err := a.decide(ctx, id, approver, domain.AdjustmentApproved)
	if err == nil && adj.Status == domain.AdjustmentRejected {
		err = fmt.Errorf("%w: adjustment %d was rejected by %s", domain.ErrConflict, id, deref(adj.DecidedBy))
	}
	if err != nil || adj.Status != domain.AdjustmentApproved {
		if err == nil && adj.Status == domain.AdjustmentFailed {
			err = fmt.Errorf("%w: adjustment %d failed: %s", domain.ErrInsufficientStock, id, deref(adj.Result))
		}
		return adj, err // decided before: the stored outcome
	}
	// Approved but not yet applied, now or by an approval that crashed
	// midway: the script is idempotent by adjustment id, so apply again.
	sku, err := domain.NewSKUID(adj.SKU)
	if err != nil {
		return adj, err
	}
	rc, err := a.stock.Adjust(ctx, sku, adj.ID, adj.Delta, deref(adj.EventID), domain.AdjustActor(adj.RequestedBy, deref(adj.DecidedBy)), adj.Reason)
	switch {
	case errors.Is(err, domain.ErrInsufficientStock):
		failed, ferr := a.store.Finish(ctx, id, domain.AdjustmentFailed, nil, err.Error())
		if ferr != nil {
			return adj, errors.Join(err, ferr)
		}
		return failed, err
	case err != nil:
		return adj, fmt.Errorf("apply adjustment %d (it stays approved; approve again to retry): %w", id, err)
	}
	applied, err := a.store.Finish(ctx, id, domain.AdjustmentApplied, &rc.Seq, fmt.Sprintf("stock is now %d", rc.Remaining))
	if err != nil {
		return adj, err
	}
	// Every manual change is followed by a reconciliation of its SKU.
	runID, err := a.reconcile(ctx, adj.SKU)
	if err != nil {
		a.log.ErrorContext(ctx, "reconciliation after adjustment failed", "adjustment", id, "sku", adj.SKU, "err", err)
		return applied, nil
	}
	return a.store.LinkReconciliation(ctx, id, runID)
}

// Reject declines adjustment id on behalf of approver, who must not be its
// requester. Rejecting it again returns it as it is; rejecting an approved
// one is domain.ErrConflict.
func (a *Adjustments) Reject(ctx context.Context, id int64, approver string) (domain.Adjustment, error) {
	adj, err := a.decide(ctx, id, approver, domain.AdjustmentRejected)
	if err == nil && adj.Status != domain.AdjustmentRejected {
		err = fmt.Errorf("%w: adjustment %d is already %s", domain.ErrConflict, id, adj.Status)
	}
	return adj, err
}

func (a *Adjustments) decide(ctx context.Context, id int64, approver string, to domain.AdjustmentStatus) (domain.Adjustment, error) {
	if approver == "" {
		return domain.Adjustment{}, domain.NewFieldError("approver", domain.ErrInvalidActor)
	}
	adj, err := a.store.Get(ctx, id)
	if err != nil {
		return domain.Adjustment{}, err
	}
	if adj.RequestedBy == approver {
		return adj, fmt.Errorf("%w: %s requested adjustment %d", domain.ErrSelfApproval, approver, id)
	}
	eventID := ""
	if to == domain.AdjustmentApproved {
		eventID = newEventID() // fixed now, so a retried apply appends the same event
	}
	adj, _, err = a.store.Decide(ctx, id, to, approver, eventID)
	return adj, err
}

// List returns adjustments, newest first; status and sku filter when set.
func (a *Adjustments) List(ctx context.Context, status, sku string, limit int) ([]domain.Adjustment, error) {
	var st domain.AdjustmentStatus
	if status != "" {
		var err error
		if st, err = domain.ParseAdjustmentStatus(status); err != nil {
			return nil, err
		}
	}
	if sku != "" {
		if _, err := domain.NewSKUID(sku); err != nil {
			return nil, err
		}
	}
	if limit <= 0 || limit > 1000 {
		return nil, domain.NewFieldError("limit", errors.New("limit must be 1-1000"))
	}
	return a.store.List(ctx, st, sku, limit)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
