package ledger

import (
	"context"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// OperationLog is the append-only audit trail of state-changing operations
// on SKUs (domain.Operation): who created, warmed, closed, archived,
// restored, repaired or rebuilt what.
type OperationLog interface {
	Record(ctx context.Context, op domain.Operation) error
	// Operations returns up to limit of the SKU's operations with id above
	// after, oldest first.
	Operations(ctx context.Context, sku string, after int64, limit int) ([]domain.Operation, error)
}

type actorKey struct{}

// UnknownActor is the actor of an operation whose context names none.
const UnknownActor = "unknown"

// WithActor returns ctx naming who acts: a principal's name, or
// "system:<component>" for the service's own components, or "cli:<os user>".
// Every operation recorded under ctx is attributed to name.
func WithActor(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, actorKey{}, name)
}

// ActorFrom returns the actor ctx names, or UnknownActor.
func ActorFrom(ctx context.Context) string {
	if name, ok := ctx.Value(actorKey{}).(string); ok && name != "" {
		return name
	}
	return UnknownActor
}

// WithDefaultActor returns ctx naming name as the actor unless it names
// one already: a component's loop acts as itself, while a call it makes
// for a person keeps that person.
func WithDefaultActor(ctx context.Context, name string) context.Context {
	if _, ok := ctx.Value(actorKey{}).(string); ok {
		return ctx
	}
	return WithActor(ctx, name)
}

// recordOperation appends one operation by ctx's actor. The state change
// already happened, so a failure says exactly that: the change stands and
// its trail entry is missing.
func recordOperation(ctx context.Context, log OperationLog, sku string, action domain.OperationAction, detail string) error {
	err := log.Record(ctx, domain.Operation{SKU: sku, Action: action, Actor: ActorFrom(ctx), Detail: detail})
	if err != nil {
		return fmt.Errorf("%s %s done, but recording who did it failed: %w", action, sku, err)
	}
	return nil
}

// OperationQuery asks for a SKU's operations with id above After (0: from
// the first), at most Limit of them (0: DefaultAuditLimit).
type OperationQuery struct {
	SKU   string
	After int64
	Limit int
}

// OperationPage is one page of a SKU's operations, oldest first. NextAfter
// is the After of the next page, nil on the last one.
type OperationPage struct {
	SKU        string
	Operations []domain.Operation
	NextAfter  *int64
}

// Operations returns a page of who did what to the SKU, oldest first.
func (a *Auditor) Operations(ctx context.Context, q OperationQuery) (OperationPage, error) {
	sku, err := domain.NewSKUID(q.SKU)
	if err != nil {
		return OperationPage{}, err
	}
	if q.After < 0 {
		return OperationPage{}, domain.NewFieldError("after", errCursor)
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return OperationPage{}, err
	}
	if err := a.defined(ctx, sku); err != nil {
		return OperationPage{}, err
	}
	rows, err := a.ops.Operations(ctx, sku.String(), q.After, limit+1)
	if err != nil {
		return OperationPage{}, fmt.Errorf("operations of %s: %w", sku, err)
	}
	page := OperationPage{SKU: sku.String(), Operations: nonNil(rows)}
	if len(rows) > limit {
		page.Operations = rows[:limit]
		next := rows[limit-1].ID
		page.NextAfter = &next
	}
	return page, nil
}
