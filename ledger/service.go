// Package ledger is the application layer of invledger. Go callers use it
// in-process, so a purchase costs one Redis round trip and no network hop of
// ours; the HTTP API and the CLI are thin adapters over it.
package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/invledger/invledger/domain"
)

// Service creates, warms and sells SKUs. It validates every input before
// anything is written: bad input is a *domain.FieldError naming the field.
type Service struct {
	inventory Inventory
	skus      SKUStore
	ledger    LedgerReader
}

// NewService wires the service to its ports.
func NewService(inventory Inventory, skus SKUStore, ledger LedgerReader) *Service {
	return &Service{inventory: inventory, skus: skus, ledger: ledger}
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
	return WarmResult{State: state, Stocked: stocked}, nil
}

// DeductCommand is one purchase attempt. RequestID is the caller's idempotency
// key: a retry with the same RequestID returns the original receipt.
type DeductCommand struct {
	SKU       string
	User      string
	Qty       int64
	RequestID string
}

// Deduct buys Qty units for User. Refusals are domain.ErrSoldOut,
// domain.ErrAlreadyPurchased, domain.ErrNotWarmed, domain.ErrClosed or
// domain.ErrConflict; they write nothing.
func (s *Service) Deduct(ctx context.Context, cmd DeductCommand) (domain.Receipt, error) {
	sku, err := domain.NewSKUID(cmd.SKU)
	if err != nil {
		return domain.Receipt{}, err
	}
	user, err := domain.NewUserID(cmd.User)
	if err != nil {
		return domain.Receipt{}, err
	}
	qty, err := domain.NewQuantity(cmd.Qty)
	if err != nil {
		return domain.Receipt{}, err
	}
	req, err := domain.NewRequestID(cmd.RequestID)
	if err != nil {
		return domain.Receipt{}, err
	}
	return s.inventory.Deduct(ctx, sku, user, qty, req, newEventID())
}

// ReleaseCommand returns the units of the deduction made by RequestID.
type ReleaseCommand struct {
	SKU       string
	User      string
	RequestID string
	Reason    string
}

// Release returns a deduction's units to stock exactly once; releasing again
// reports the original release. An unknown deduction is domain.ErrNotFound.
func (s *Service) Release(ctx context.Context, cmd ReleaseCommand) (domain.ReleaseReceipt, error) {
	sku, err := domain.NewSKUID(cmd.SKU)
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	user, err := domain.NewUserID(cmd.User)
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	req, err := domain.NewRequestID(cmd.RequestID)
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	reason, err := domain.NewReason(cmd.Reason)
	if err != nil {
		return domain.ReleaseReceipt{}, err
	}
	rel, err := s.inventory.Release(ctx, sku, user, req, reason, newEventID())
	if errors.Is(err, domain.ErrNotWarmed) {
		return domain.ReleaseReceipt{}, fmt.Errorf("%w: sku %s is not warmed, so it has no deduction %q", domain.ErrNotFound, sku, req)
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
	LedgerSeq   *int64
	Status      domain.SKUStatus
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
		view.RedisStock, view.RedisSeq, view.Status = &live.Stock, &live.Seq, live.Status
		if !live.Verified {
			view.Status = domain.StatusRecovering
		}
	case !errors.Is(err, domain.ErrNotWarmed):
		return SKUView{}, err
	}
	bal, err := s.ledger.Balance(ctx, sku)
	switch {
	case err == nil:
		view.LedgerStock, view.LedgerSeq = &bal.Stock, &bal.LastSeq
	case !errors.Is(err, domain.ErrNotFound):
		return SKUView{}, err
	}
	return view, nil
}

// newEventID makes time-ordered UUIDs (v7), so ledger primary-key inserts
// land at the right edge of the index instead of scattering.
// uuid.Must cannot fire: since Go 1.24 crypto/rand.Read never returns an error.
func newEventID() string { return uuid.Must(uuid.NewV7()).String() }
