package ledger

import (
	"context"

	"github.com/invledger/invledger/domain"
)

// Inventory is the live stock the purchase path deducts from: Redis in
// production. Every method is one atomic step that also appends its event.
type Inventory interface {
	Warm(ctx context.Context, def domain.SKUDefinition, eventID string) (state domain.StockState, stocked bool, err error)
	Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error)
	Release(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID, reason domain.Reason, eventID string) (domain.ReleaseReceipt, error)
	State(ctx context.Context, sku domain.SKUID) (domain.StockState, error)
	retiredChecker
}

// retiredChecker tells a retired SKU. The purchase and hold inventories
// both carry it, for whenRetired.
type retiredChecker interface {
	// Retired tells whether the SKU was retired from Redis: its tombstone,
	// read only on refusal paths, where Redis answered not warmed.
	Retired(ctx context.Context, sku domain.SKUID) (bool, error)
}

// SKUStore keeps SKU definitions.
type SKUStore interface {
	Create(ctx context.Context, def domain.SKUDefinition) (created bool, err error)
	Get(ctx context.Context, sku domain.SKUID) (domain.SKUDefinition, error)
	ClaimStockedEventID(ctx context.Context, sku domain.SKUID, candidate string) (string, error)
}

// LedgerReader answers what the append-only ledger already knows about a SKU.
type LedgerReader interface {
	HasEvents(ctx context.Context, sku domain.SKUID) (bool, error)
	// Balance returns the SKU's balances row and its watermark, the highest
	// seq with no gap below it, read together; domain.ErrNotFound before the
	// first projection.
	Balance(ctx context.Context, sku domain.SKUID) (bal domain.LedgerBalance, watermark int64, err error)
	// Purchase finds the deduction user made of sku with request id req,
	// and its release if any; found is false when the ledger has none.
	Purchase(ctx context.Context, sku domain.SKUID, user domain.UserID, req domain.RequestID) (p domain.Purchase, found bool, err error)
}
