package ledger

import (
	"context"

	"github.com/invledger/invledger/domain"
)

// HoldInventory runs the hold scripts. *redisinventory.RedisInventory
// satisfies it.
type HoldInventory interface {
	Reserve(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID,
		ttl domain.HoldTTL, orderID string, eventID string) (domain.Hold, error)
	ConfirmHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error)
	CancelHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error)
	Hold(ctx context.Context, sku domain.SKUID, hold domain.HoldID) (domain.Hold, error)
}

// Holds reserves units for a while: a hold ends once, confirmed (a sale),
// cancelled or expired, and expiry needs no caller (see HoldExpiry).
// Every refusal writes nothing.
type Holds struct {
	inv HoldInventory
	cfg domain.HoldConfig
}

// NewHolds returns the hold service over inv, with cfg's ttl bounds
// (defaults applied).
func NewHolds(inv HoldInventory, cfg domain.HoldConfig) (*Holds, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Holds{inv: inv, cfg: cfg}, nil
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
	return h.inv.Reserve(ctx, cmd.SKU, cmd.User, cmd.Qty, cmd.RequestID, cmd.TTL, "", newEventID())
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

// Confirm makes the hold a sale; repeating it gives the same answer.
func (h *Holds) Confirm(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	return h.inv.ConfirmHold(ctx, ref.SKU, ref.Hold, newEventID())
}

// Cancel gives the hold's units back; repeating it gives the same answer.
func (h *Holds) Cancel(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	return h.inv.CancelHold(ctx, ref.SKU, ref.Hold, newEventID())
}

// Hold reads the hold's state; one past its deadline reads as expired.
func (h *Holds) Hold(ctx context.Context, ref HoldRef) (domain.Hold, error) {
	return h.inv.Hold(ctx, ref.SKU, ref.Hold)
}
