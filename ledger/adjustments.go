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
	// Decide moves a pending adjustment to status by decidedBy; decided is
	// false, and the current row is returned, when it was no longer pending.
	Decide(ctx context.Context, id int64, status domain.AdjustmentStatus, decidedBy, eventID string) (adj domain.Adjustment, decided bool, err error)
	// Settle locks adjustment id and, while it is still approved, calls
	// settle with it under the lock and stores the Settlement it returns
	// (nil: nothing). It returns the row as it stands afterwards. Settles of
	// one id run one after another, so an approved adjustment is applied,
	// failed or rejected exactly once. An error from settle stores nothing
	// and is returned.
	Settle(ctx context.Context, id int64, settle func(ctx context.Context, adj domain.Adjustment) (*Settlement, error)) (domain.Adjustment, error)
	LinkReconciliation(ctx context.Context, id, runID int64) (domain.Adjustment, error)
	// List returns up to q.Limit adjustments, newest first, with id below
	// q.After when it is not 0.
	List(ctx context.Context, q AdjustmentQuery) ([]domain.Adjustment, error)
}

// Settlement is how an approved adjustment ends: applied at Seq, failed,
// or rejected by DecidedBy. Result says what happened, in words.
type Settlement struct {
	Status    domain.AdjustmentStatus
	Seq       *int64
	Result    string
	DecidedBy string
}

// StockAdjuster applies an approved adjustment to live stock, once per id.
type StockAdjuster interface {
	Adjust(ctx context.Context, sku domain.SKUID, adjustmentID, delta int64, eventID, actor, reason string) (domain.Receipt, error)
	// Applied tells whether adjustment adjustmentID was applied to the
	// SKU's live stock, with its receipt if so. A SKU not in Redis has none.
	Applied(ctx context.Context, sku domain.SKUID, adjustmentID int64) (domain.Receipt, bool, error)
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
// requester, in any letter case (domain.ErrSelfApproval). Every approval,
// also one racing another, answers the stored outcome: the applied
// adjustment, or the error the first approval got; it never applies twice.
// A change that would take stock below zero marks the adjustment failed and
// returns domain.ErrInsufficientStock.
func (a *Adjustments) Approve(ctx context.Context, id int64, approver string) (domain.Adjustment, error) {
	adj, err := a.decide(ctx, id, approver, domain.AdjustmentApproved)
	if err != nil || adj.Status != domain.AdjustmentApproved {
		return adj, errOrOutcome(adj, err)
	}
	// Approved but not yet applied, now or by an approval that crashed
	// midway: the script is idempotent by adjustment id, so apply again.
	applied := false
	settled, err := a.store.Settle(ctx, id, func(ctx context.Context, adj domain.Adjustment) (*Settlement, error) {
		sku, err := domain.NewSKUID(adj.SKU)
		if err != nil {
			return nil, err
		}
		rc, err := a.stock.Adjust(ctx, sku, adj.ID, adj.Delta, deref(adj.EventID), domain.AdjustActor(adj.RequestedBy, deref(adj.DecidedBy)), adj.Reason)
		switch {
		case errors.Is(err, domain.ErrInsufficientStock):
			return &Settlement{Status: domain.AdjustmentFailed, Result: err.Error()}, nil
		case err != nil:
			return nil, fmt.Errorf("apply adjustment %d (it stays approved; approve again to retry, or reject it): %w", id, err)
		}
		applied = true
		return &Settlement{Status: domain.AdjustmentApplied, Seq: &rc.Seq, Result: fmt.Sprintf("stock is now %d", rc.Remaining)}, nil
	})
	if err != nil {
		return adj, err
	}
	if !applied { // settled by another approval, or failed here
		return settled, errOrOutcome(settled, nil)
	}
	// Every manual change is followed by a reconciliation of its SKU.
	runID, err := a.reconcile(ctx, adj.SKU)
	if err != nil {
		a.log.ErrorContext(ctx, "reconciliation after adjustment failed", "adjustment", id, "sku", adj.SKU, "err", err)
		return settled, nil
	}
	return a.store.LinkReconciliation(ctx, id, runID)
}

// errOrOutcome is err, or the error an approval of adj answers once adj is
// decided: domain.ErrConflict when it was rejected,
// domain.ErrInsufficientStock when it failed, nil when it was applied.
func errOrOutcome(adj domain.Adjustment, err error) error {
	if err != nil {
		return err
	}
	switch adj.Status {
	case domain.AdjustmentRejected:
		return fmt.Errorf("%w: adjustment %d was rejected by %s", domain.ErrConflict, adj.ID, deref(adj.DecidedBy))
	case domain.AdjustmentFailed:
		return fmt.Errorf("%w: adjustment %d failed: %s", domain.ErrInsufficientStock, adj.ID, deref(adj.Result))
	}
	return nil
}

// Reject declines adjustment id on behalf of approver, who must not be its
// requester. A pending adjustment is rejected; so is an approved one that
// was never applied (for example because its SKU was not warmed), unless
// Redis shows it applied after all, which then records it applied and is
// domain.ErrConflict. Rejecting again returns it as it is; rejecting an
// applied or failed one is domain.ErrConflict.
func (a *Adjustments) Reject(ctx context.Context, id int64, approver string) (domain.Adjustment, error) {
	adj, err := a.decide(ctx, id, approver, domain.AdjustmentRejected)
	if err == nil && adj.Status == domain.AdjustmentApproved {
		adj, err = a.store.Settle(ctx, id, func(ctx context.Context, adj domain.Adjustment) (*Settlement, error) {
			sku, err := domain.NewSKUID(adj.SKU)
			if err != nil {
				return nil, err
			}
			rc, done, err := a.stock.Applied(ctx, sku, adj.ID)
			if err != nil {
				return nil, fmt.Errorf("reject adjustment %d: check whether it was applied: %w", id, err)
			}
			if done {
				return &Settlement{Status: domain.AdjustmentApplied, Seq: &rc.Seq, Result: fmt.Sprintf("stock was %d after it", rc.Remaining)}, nil
			}
			return &Settlement{Status: domain.AdjustmentRejected, DecidedBy: approver,
				Result: fmt.Sprintf("approved by %s but never applied; rejected by %s", deref(adj.DecidedBy), approver)}, nil
		})
	}
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
	if domain.SamePerson(adj.RequestedBy, approver) {
		return adj, fmt.Errorf("%w: %s requested adjustment %d", domain.ErrSelfApproval, adj.RequestedBy, id)
	}
	eventID := ""
	if to == domain.AdjustmentApproved {
		eventID = newEventID() // fixed now, so a retried apply appends the same event
	}
	adj, _, err = a.store.Decide(ctx, id, to, approver, eventID)
	return adj, err
}

// AdjustmentQuery asks for adjustments, newest first: Status and SKU
// filter when set; After is a previous page's NextAfter (0: from the
// newest); Limit is the page size (0: DefaultAuditLimit).
type AdjustmentQuery struct {
	Status string
	SKU    string
	After  int64
	Limit  int
}

// AdjustmentPage is one page of adjustments, newest first. NextAfter is
// the After of the next page, nil on the last one.
type AdjustmentPage struct {
	Adjustments []domain.Adjustment
	NextAfter   *int64
}

// List returns a page of adjustments, newest first.
func (a *Adjustments) List(ctx context.Context, q AdjustmentQuery) (AdjustmentPage, error) {
	if q.Status != "" {
		if _, err := domain.ParseAdjustmentStatus(q.Status); err != nil {
			return AdjustmentPage{}, err
		}
	}
	if q.SKU != "" {
		if _, err := domain.NewSKUID(q.SKU); err != nil {
			return AdjustmentPage{}, err
		}
	}
	if q.After < 0 {
		return AdjustmentPage{}, domain.NewFieldError("after", errCursor)
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return AdjustmentPage{}, err
	}
	q.Limit = limit + 1 // one row more than asked tells whether another page follows
	rows, err := a.store.List(ctx, q)
	if err != nil {
		return AdjustmentPage{}, err
	}
	page := AdjustmentPage{Adjustments: nonNil(rows)}
	if len(rows) > limit {
		page.Adjustments = rows[:limit]
		next := rows[limit-1].ID
		page.NextAfter = &next
	}
	return page, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
