package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// HoldInventory runs the hold scripts, and tells a retired SKU by its
// tombstone. *redisinventory.RedisInventory satisfies it.
type HoldInventory interface {
	Reserve(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID,
		ttl domain.HoldTTL, orderID string, eventID string) (domain.Hold, error)
	ConfirmHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error)
	CancelHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error)
	Hold(ctx context.Context, sku domain.SKUID, hold domain.HoldID) (domain.Hold, error)
	retiredChecker
}

// HoldHistory finds a hold's events in the ledger, for a SKU retired from
// Redis. *pgstore.PostgresLedgerStore satisfies it.
type HoldHistory interface {
	// HoldEvents returns the events that carry the hold's id, in seq
	// order: its reserve, its end and the release of its sale.
	HoldEvents(ctx context.Context, sku domain.SKUID, hold domain.HoldID) ([]domain.Event, error)
}

// Holds reserves units for a while: a hold ends once, confirmed (a sale),
// cancelled or expired, and expiry needs no caller (see HoldExpiry).
// Every refusal writes nothing. Once the SKU is retired, the ledger answers
// as deduct's does: reads and repeated ends get the hold the ledger tells,
// and a new reserve is refused as closed.
type Holds struct {
	inv     HoldInventory
	history HoldHistory
	cfg     domain.HoldConfig
}

// NewHolds returns the hold service over inv, with cfg's ttl bounds
// (defaults applied). history, which may be nil, answers for the holds of
// a retired SKU; without it they are not found.
func NewHolds(inv HoldInventory, history HoldHistory, cfg domain.HoldConfig) (*Holds, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Holds{inv: inv, history: history, cfg: cfg}, nil
}

// Config returns the ttl bounds in force.
func (h *Holds) Config() domain.HoldConfig { return h.cfg }

// ReserveCommand is a validated reserve.
type ReserveCommand struct {
	SKU       domain.SKUID
	User      domain.UserID
	Qty       domain.Quantity
	RequestID domain.RequestID
	TTL       domain.HoldTTL
}

// NewReserveCommand validates a reserve given as strings, in the order sku,
// user_id, qty, request_id, ttl_seconds; a nil ttl is the default one. Bad
// input is a *domain.FieldError naming the first field at fault.
func (h *Holds) NewReserveCommand(sku, user string, qty int64, requestID string, ttlSeconds *int64) (ReserveCommand, error) {
	d, err := NewDeductCommand(sku, user, qty, requestID)
	if err != nil {
		return ReserveCommand{}, err
	}
	ttl, err := h.cfg.NewHoldTTL(ttlSeconds)
	if err != nil {
		return ReserveCommand{}, err
	}
	return ReserveCommand{SKU: d.SKU, User: d.User, Qty: d.Qty, RequestID: d.RequestID, TTL: ttl}, nil
}

// Reserve takes the units out of available stock until the hold ends. It
// refuses as Deduct does; a retry with the same request id returns the
// original hold, in its state now.
func (h *Holds) Reserve(ctx context.Context, cmd ReserveCommand) (domain.Hold, error) {
	return h.reserve(ctx, cmd, "")
}

// reserve is Reserve for a line of order orderID ("" for none). On a
// retired SKU, a retry gets the hold the ledger holds for its request id
// and anything else is refused as closed.
func (h *Holds) reserve(ctx context.Context, cmd ReserveCommand, orderID string) (domain.Hold, error) {
	hold, err := h.inv.Reserve(ctx, cmd.SKU, cmd.User, cmd.Qty, cmd.RequestID, cmd.TTL, orderID, newEventID())
	return whenRetired(ctx, h.inv, cmd.SKU, hold, err, func() (domain.Hold, error) {
		got, err := h.fromLedger(ctx, cmd.SKU, domain.HoldIDFor(cmd.SKU, cmd.RequestID))
		switch {
		case errors.Is(err, domain.ErrHoldNotFound):
			return domain.Hold{}, fmt.Errorf("%w: sku %s is retired: its sale ended", domain.ErrClosed, cmd.SKU)
		case err != nil:
			return domain.Hold{}, err
		case got.User != cmd.User.String() || got.Qty != cmd.Qty.Int64() || got.OrderID != orderID:
			return domain.Hold{}, fmt.Errorf("%w: request_id %q was used by another user, quantity or order", domain.ErrConflict, cmd.RequestID.String())
		}
		got.Replayed = true
		return got, nil
	})
}

// HoldRef names one hold of one SKU, validated.
type HoldRef struct {
	SKU  domain.SKUID
	Hold domain.HoldID
}

// NewHoldRef validates a hold reference given as strings: sku, then hold_id.
func NewHoldRef(sku, hold string) (HoldRef, error) {
	id, err := domain.NewSKUID(sku)
	if err != nil {
		return HoldRef{}, err
	}
	h, err := domain.NewHoldID(hold)
	if err != nil {
		return HoldRef{}, err
	}
	return HoldRef{SKU: id, Hold: h}, nil
}

// Confirm makes the hold a sale; repeating it gives the same answer. A
// hold whose sale was released since is refused with domain.ErrHoldReleased.
func (h *Holds) Confirm(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	hold, err := h.inv.ConfirmHold(ctx, ref.SKU, ref.Hold, newEventID())
	return whenRetired(ctx, h.inv, ref.SKU, hold, err, func() (domain.Hold, error) { return h.endedInLedger(ctx, ref, domain.HoldConfirmed) })
}

// Cancel gives the hold's units back; repeating it gives the same answer.
func (h *Holds) Cancel(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	hold, err := h.inv.CancelHold(ctx, ref.SKU, ref.Hold, newEventID())
	return whenRetired(ctx, h.inv, ref.SKU, hold, err, func() (domain.Hold, error) { return h.endedInLedger(ctx, ref, domain.HoldCancelled) })
}

// Hold reads the hold's state; one past its deadline reads as expired, and
// a confirmed one whose sale was released since as released.
func (h *Holds) Hold(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	hold, err := h.inv.Hold(ctx, ref.SKU, ref.Hold)
	return whenRetired(ctx, h.inv, ref.SKU, hold, err, func() (domain.Hold, error) { return h.fromLedger(ctx, ref.SKU, ref.Hold) })
}

// endedInLedger answers a confirm or cancel (want) of a hold of a retired
// SKU, as hold_end.lua answers one of a hold that has ended: a repeat gets
// the hold, anything else the refusal of the state it ended in. Retire
// refuses a SKU with open holds, so every hold the ledger finds has ended.
func (h *Holds) endedInLedger(ctx context.Context, ref HoldRef, want domain.HoldStatus) (domain.Hold, error) {
	hold, err := h.fromLedger(ctx, ref.SKU, ref.Hold)
	switch {
	case err != nil:
		return domain.Hold{}, err
	case hold.Status != want:
		return domain.Hold{}, fmt.Errorf("%w: hold %s of %s", domain.ErrHoldEnded(hold.Status), ref.Hold, ref.SKU)
	}
	return hold, nil
}

// fromLedger is the hold as the ledger tells it: its reserve, then its end,
// then the release of its sale. A hold the ledger has no reserve of is
// domain.ErrHoldNotFound.
func (h *Holds) fromLedger(ctx context.Context, sku domain.SKUID, id domain.HoldID) (domain.Hold, error) {
	var events []domain.Event
	if h.history != nil {
		var err error
		if events, err = h.history.HoldEvents(ctx, sku, id); err != nil {
			return domain.Hold{}, fmt.Errorf("hold %s of %s from the ledger: %w", id, sku, err)
		}
	}
	var hold domain.Hold
	for _, e := range events {
		switch e.Type {
		case domain.EventReserved:
			hold = domain.Hold{HoldID: e.HoldID, SKU: e.SKU, User: e.User, Qty: e.Qty, Status: domain.HoldHeld, ExpiresAt: e.ExpiresAt,
				Seq: e.Seq, Remaining: e.Balance, RequestID: e.RequestID, OrderID: e.OrderID, EventID: e.ID}
		case domain.EventConfirmed, domain.EventCancelled, domain.EventExpired:
			hold.Status, hold.EndSeq, hold.EndEventID = domain.HoldStatus(e.Type), e.Seq, e.ID
		case domain.EventReleased:
			hold.Status = domain.HoldReleased
		}
	}
	if hold.HoldID == "" {
		return domain.Hold{}, fmt.Errorf("%w: sku %s has no hold %s", domain.ErrHoldNotFound, sku, id)
	}
	return hold, nil
}
