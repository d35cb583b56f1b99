package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// Service creates, warms and sells SKUs. Nothing is written before the input
// is valid: deductions and releases arrive as commands of validated domain
// values, and the other methods validate their strings first. Bad input is a
// *domain.FieldError naming the field.
type Service struct {
	inventory Inventory
	skus      SKUStore
	ledger    LedgerReader
	ops       OperationLog
}

// NewService wires the service to its ports. ops records who created and
// warmed each SKU.
func NewService(inventory Inventory, skus SKUStore, ledger LedgerReader, ops OperationLog) *Service {
	return &Service{inventory: inventory, skus: skus, ledger: ledger, ops: ops}
}

// CreateSKUCommand declares a sale. PerUserLimit defaults to 1 when zero.
type CreateSKUCommand struct {
	SKU          string
	Stock        int64
	PerUserLimit int64
}

// CreateSKU stores a SKU definition. created is false when an identical
// definition already existed; a different one is domain.ErrConflict.
func (s *Service) CreateSKU(ctx context.Context, cmd CreateSKUCommand) (def domain.SKUDefinition, created bool, err error) {
	sku, err := domain.NewSKUID(cmd.SKU)
	if err != nil {
		return domain.SKUDefinition{}, false, err
	}
	if cmd.PerUserLimit == 0 {
		cmd.PerUserLimit = 1
	}
	def, err = domain.NewSKUDefinition(sku, cmd.Stock, cmd.PerUserLimit)
	if err != nil {
		return domain.SKUDefinition{}, false, err
	}
	created, err = s.skus.Create(ctx, def)
	if err == nil && created {
		err = recordOperation(ctx, s.ops, sku.String(), domain.ActionCreate,
			fmt.Sprintf("stock=%d per_user_limit=%d", def.InitialStock(), def.PerUserLimit()))
	}
	return def, created, err
}

// WarmResult reports a warm: Stocked is false when the SKU was already live
// and nothing changed.
type WarmResult struct {
	State   domain.StockState
	Stocked bool
}

// Warm loads a SKU into Redis and appends its stocked event. Re-warming a live
// SKU is a no-op that reports its state; it never resets stock. If the ledger
// already holds events for a SKU that Redis no longer has, Warm refuses with
// domain.ErrNeedsRestore: stocking it again would double its stock.
func (s *Service) Warm(ctx context.Context, skuID string) (WarmResult, error) {
	sku, err := domain.NewSKUID(skuID)
	if err != nil {
		return WarmResult{}, err
	}
	def, err := s.skus.Get(ctx, sku)
	if err != nil {
		return WarmResult{}, err
	}
	state, err := s.inventory.State(ctx, sku)
	switch {
	case err == nil:
		return WarmResult{State: state}, nil
	case !errors.Is(err, domain.ErrNotWarmed):
		return WarmResult{}, err
	}
	projected, err := s.ledger.HasEvents(ctx, sku)
	if err != nil {
		return WarmResult{}, err
	}
	if projected {
		return WarmResult{}, fmt.Errorf("warm %s: %w", sku, domain.ErrNeedsRestore)
	}
	eventID, err := s.skus.ClaimStockedEventID(ctx, sku, newEventID())
	if err != nil {
		return WarmResult{}, err
	}
	state, stocked, err := s.inventory.Warm(ctx, def, eventID)
	if err != nil {
		return WarmResult{}, err
	}
	if stocked {
		if err := recordOperation(ctx, s.ops, sku.String(), domain.ActionWarm, fmt.Sprintf("stock=%d seq=%d", state.Stock, state.Seq)); err != nil {
			return WarmResult{}, err
		}
	}
	return WarmResult{State: state, Stocked: stocked}, nil
}

// DeductCommand is one purchase attempt, already validated: its fields are
// domain values, so the service does not check them again. Callers holding
// strings build it with NewDeductCommand. RequestID is the caller's
// idempotency key: a retry with the same RequestID returns the original
// receipt.
type DeductCommand struct {
	SKU       domain.SKUID
	User      domain.UserID
	Qty       domain.Quantity
	RequestID domain.RequestID
}

// NewDeductCommand validates a purchase attempt given as strings, field by
// field in the order sku, user_id, qty, request_id; bad input is a
// *domain.FieldError naming the first field at fault.
func NewDeductCommand(sku, user string, qty int64, requestID string) (DeductCommand, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return DeductCommand{}, err
	}
	u, err := domain.NewUserID(user)
	if err != nil {
		return DeductCommand{}, err
	}
	q, err := domain.NewQuantity(qty)
	if err != nil {
		return DeductCommand{}, err
	}
	req, err := domain.NewRequestID(requestID)
	if err != nil {
		return DeductCommand{}, err
	}
	return DeductCommand{SKU: id, User: u, Qty: q, RequestID: req}, nil
}

// MustDeductCommand is NewDeductCommand for values known to be valid, such
// as literals in tests; it panics on invalid input, like regexp.MustCompile.
func MustDeductCommand(sku, user string, qty int64, requestID string) DeductCommand {
	return must(NewDeductCommand(sku, user, qty, requestID))
}

// Deduct buys Qty units for User. Refusals are domain.ErrSoldOut,
// domain.ErrAlreadyPurchased, domain.ErrNotWarmed, domain.ErrNotFound (a SKU
// that was never created), domain.ErrClosed (also for a retired SKU) or
// domain.ErrConflict; they write nothing. A Qty above the SKU's per-user
// limit is a *domain.FieldError naming qty. A retry of a request of a
// retired SKU gets its original receipt from the ledger.
func (s *Service) Deduct(ctx context.Context, cmd DeductCommand) (domain.Receipt, error) {
	rc, err := s.inventory.Deduct(ctx, cmd.SKU, cmd.User, cmd.Qty, cmd.RequestID, newEventID())
	rc, err = whenRetired(ctx, s.inventory, cmd.SKU, rc, err, func() (domain.Receipt, error) { return s.retiredReceipt(ctx, cmd) })
	if errors.Is(err, domain.ErrNotWarmed) {
		return domain.Receipt{}, s.notWarmedOrUnknown(ctx, cmd.SKU, err)
	}
	return rc, err
}

// whenRetired passes on v and err, Redis's answer to a call about sku,
// unless Redis refused it as not warmed and sku is retired: then the
// ledger answers, through fromLedger. Every call that a retired SKU's
// ledger answers (purchase, release, the hold and order routes) goes
// through here, so they all tell a retired SKU the same way, and only on
// this refusal path.
func whenRetired[T any](ctx context.Context, inv retiredChecker, sku domain.SKUID, v T, err error, fromLedger func() (T, error)) (T, error) {
	if !errors.Is(err, domain.ErrNotWarmed) {
		return v, err
	}
	retired, rerr := inv.Retired(ctx, sku)
	switch {
	case rerr != nil:
		return v, rerr
	case retired:
		return fromLedger()
	}
	return v, err
}

// retiredReceipt answers a purchase of a retired SKU: a retry gets the
// receipt the ledger holds for its request id, as batch.lua would have
// replayed it, and anything else is refused as closed. This refusal path
// may read PostgreSQL; a sale never does. The ledger is searched among the
// user's own rows, so a request id another user made is refused as closed
// rather than as a conflict: a refusal either way, writing nothing.
func (s *Service) retiredReceipt(ctx context.Context, cmd DeductCommand) (domain.Receipt, error) {
	p, found, err := s.ledger.Purchase(ctx, cmd.SKU, cmd.User, cmd.RequestID)
	switch {
	case err != nil:
		return domain.Receipt{}, err
	case !found:
		return domain.Receipt{}, fmt.Errorf("%w: sku %s is retired: its sale ended", domain.ErrClosed, cmd.SKU)
	case p.Qty != cmd.Qty.Int64():
		return domain.Receipt{}, fmt.Errorf("%w: request_id %q was used by another user or quantity", domain.ErrConflict, cmd.RequestID.String())
	}
	return domain.Receipt{SKU: cmd.SKU.String(), Qty: p.Qty, User: p.User, RequestID: cmd.RequestID.String(), EventID: p.EventID,
		Seq: p.Seq, Remaining: p.Remaining, Replayed: true, Released: p.Released}, nil
}

// notWarmedOrUnknown refines notWarmed, Redis's answer for a SKU it does not
// hold, into domain.ErrNotFound when the SKU store has no such SKU either.
// Only this refusal path asks the store, so a sale never pays for it and
// the purchase script keeps its keys. A SKU that exists gets the next
// step; when the store cannot answer, the caller gets notWarmed: a refusal
// either way, and the truer one when the SKU exists but Redis lost it.
func (s *Service) notWarmedOrUnknown(ctx context.Context, sku domain.SKUID, notWarmed error) error {
	switch _, err := s.skus.Get(ctx, sku); {
	case errors.Is(err, domain.ErrNotFound):
		return fmt.Errorf("%w: sku %s was never created", domain.ErrNotFound, sku)
	case err != nil:
		return notWarmed
	}
	return fmt.Errorf("%w: sku %s exists but its stock is not in Redis; an operator warms it (invledger sku warm %s, or POST /v1/skus/%s/warm), which says when it must be restored from the ledger instead",
		notWarmed, sku, sku, sku)
}

// ReleaseCommand returns the units of the deduction made by RequestID. Like
// DeductCommand it holds validated domain values; callers holding strings
// build it with NewReleaseCommand. Reason may be empty.
type ReleaseCommand struct {
	SKU       domain.SKUID
	User      domain.UserID
	RequestID domain.RequestID
	Reason    domain.Reason
}

// NewReleaseCommand validates a release given as strings, in the order sku,
// user_id, request_id, reason; bad input is a *domain.FieldError naming the
// first field at fault.
func NewReleaseCommand(sku, user, requestID, reason string) (ReleaseCommand, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return ReleaseCommand{}, err
	}
	u, err := domain.NewUserID(user)
	if err != nil {
		return ReleaseCommand{}, err
	}
	req, err := domain.NewRequestID(requestID)
	if err != nil {
		return ReleaseCommand{}, err
	}
	r, err := domain.NewReason(reason)
	if err != nil {
		return ReleaseCommand{}, err
	}
	return ReleaseCommand{SKU: id, User: u, RequestID: req, Reason: r}, nil
}

// MustReleaseCommand is NewReleaseCommand for values known to be valid; it
// panics on invalid input.
func MustReleaseCommand(sku, user, requestID, reason string) ReleaseCommand {
	return must(NewReleaseCommand(sku, user, requestID, reason))
}

func must[C any](cmd C, err error) C {
	if err != nil {
		panic(err)
	}
	return cmd
}

// Release returns a deduction's units to stock exactly once; releasing again
// reports the original release. An unknown deduction is domain.ErrNotFound;
// a retired SKU is domain.ErrRetired, naming the restore that reopens it.
func (s *Service) Release(ctx context.Context, cmd ReleaseCommand) (domain.ReleaseReceipt, error) {
	rel, err := s.inventory.Release(ctx, cmd.SKU, cmd.User, cmd.RequestID, cmd.Reason, newEventID())
	rel, err = whenRetired(ctx, s.inventory, cmd.SKU, rel, err, func() (domain.ReleaseReceipt, error) {
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: sku %s left Redis after its sale; to release its units, "+
			"bring it back first with `invledger restore-redis --sku %s`", domain.ErrRetired, cmd.SKU, cmd.SKU)
	})
	if errors.Is(err, domain.ErrNotWarmed) {
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: sku %s is not warmed, so it has no deduction %q", domain.ErrNotFound, cmd.SKU, cmd.RequestID)
	}
	return rel, err
}

// SKUView is a SKU as Redis and the ledger each see it. Nil figures are not
// known yet: Redis ones before warm, ledger ones before the first projection.
type SKUView struct {
	Definition  domain.SKUDefinition
	RedisStock  *int64
	RedisSeq    *int64
	LedgerStock *int64
	// LedgerSeq is the highest seq the ledger has seen. It can run ahead of
	// a gap: seqs below it may still be on their way.
	LedgerSeq *int64
	// LedgerWatermark is the highest seq with no gap below it: the ledger
	// holds every event up to it. State fills it; lists leave it nil.
	LedgerWatermark *int64
	// RedisHeld and LedgerHeld are the units of open holds on each side,
	// out of the stock. State fills them; lists leave them nil.
	RedisHeld  *int64
	LedgerHeld *int64
	Status     domain.SKUStatus
}

// State shows a SKU from both sides. An undefined SKU is domain.ErrNotFound.
func (s *Service) State(ctx context.Context, skuID string) (SKUView, error) {
	sku, err := domain.NewSKUID(skuID)
	if err != nil {
		return SKUView{}, err
	}
	def, err := s.skus.Get(ctx, sku)
	if err != nil {
		return SKUView{}, err
	}
	view := SKUView{Definition: def, Status: domain.StatusNotWarmed}
	live, err := s.inventory.State(ctx, sku)
	switch {
	case err == nil:
		view.setLive(live)
		view.RedisHeld = &live.Held
	case !errors.Is(err, domain.ErrNotWarmed):
		return SKUView{}, err
	default:
		retired, err := s.inventory.Retired(ctx, sku)
		if err != nil {
			return SKUView{}, err
		}
		if retired {
			view.Status = domain.StatusRetired
		}
	}
	bal, watermark, err := s.ledger.Balance(ctx, sku)
	switch {
	case err == nil:
		view.LedgerStock, view.LedgerSeq, view.LedgerWatermark, view.LedgerHeld = &bal.Stock, &bal.LastSeq, &watermark, &bal.Held
	case !errors.Is(err, domain.ErrNotFound):
		return SKUView{}, err
	}
	return view, nil
}

// setLive fills the Redis side of v from live: a SKU not verified under
// the current Redis run shows as recovering, whatever its status.
func (v *SKUView) setLive(live domain.StockState) {
	if live.Corrupt {
		v.Status = domain.StatusRecovering
		return
	}
	v.RedisStock, v.RedisSeq, v.Status = &live.Stock, &live.Seq, live.Status
	if !live.Verified {
		v.Status = domain.StatusRecovering
	}
}

// newEventID makes time-ordered UUIDs (v7), so ledger primary-key inserts
// land at the right edge of the index instead of scattering.
// uuid.Must cannot fire: since Go 1.24 crypto/rand.Read never returns an error.
func newEventID() string { return uuid.Must(uuid.NewV7()).String() }
