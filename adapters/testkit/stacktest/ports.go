package stacktest

import (
	"context"

	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/ledger/reconcile"
	"github.com/invledger/invledger/ledger/seal"
)

// The stack's adapters, typed by the ports their tests use them through:
// the ledger's where it declares one, and the few extra methods a test of
// Redis or the ledger reaches for. The concrete adapters stay inside
// adapters/, so the test kit hands out no internal type.

// Keys names the Redis keys of the stack's keyspace, for tests that read or
// break Redis directly.
type Keys interface {
	Partition(sku string) int
	SKUKey(sku string) string
	BuyersKey(sku string) string
	RequestsKey(sku string) string
	RefusalsKey(sku string) string
	SKUTombstoneKey(sku string) string
	ExpiryKey(partition int) string
	SKUExpiryKey(sku string) string
	StreamKey(partition int) string
	SKUStreamKey(sku string) string
	StreamKeys() []string
	// ReceiptAt and CountAt are where a SKU whose hash's layout field
	// reads layout keeps a receipt or a buyer's count (docs/storage.md);
	// Stack.ReceiptAt and Stack.CountAt read the layout.
	ReceiptAt(sku, layout, req string) (key, field string)
	CountAt(sku, layout, user string) (key, field string)
}

// NodeRunWatch tells when the application's Redis client met a node run it
// had not seen.
type NodeRunWatch interface {
	Changed() <-chan struct{}
}

// Inventory is the Redis purchase and hold adapter.
type Inventory interface {
	ledger.Inventory
	ledger.HoldInventory
	ledger.InventoryStates
}

// NodeRuns reads the node runs of Redis and whether a stream entry
// survived a restart.
type NodeRuns interface {
	NodeRuns(ctx context.Context) (string, error)
	EntryExists(ctx context.Context, stream, id string) (bool, error)
}

// SKUs is the PostgreSQL SKU store, under every port that reads it.
type SKUs interface {
	ledger.SKUStore
	ledger.SKUCatalog
	ledger.SKUDefinitions
	reconcile.SKULister
}

// Ledger is the PostgreSQL ledger, read.
type Ledger interface {
	ledger.LedgerReader
	ledger.LedgerScanner
}

// Seals is the ledger's tamper-evident chain: sealed by seal, verified by
// ledger.VerifyChains.
type Seals interface {
	seal.Store
	ledger.ChainScanner
}
