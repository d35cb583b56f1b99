package domain

import "time"

// SKUStatus is the lifecycle state of a SKU's live inventory in Redis.
type SKUStatus string

const (
	// StatusNotWarmed means the SKU is defined but its stock is not in Redis.
	StatusNotWarmed SKUStatus = "not_warmed"
	// StatusOpen means the SKU accepts deductions.
	StatusOpen SKUStatus = "open"
	// StatusClosed means the sale ended; deductions are refused.
	StatusClosed SKUStatus = "closed"
	// StatusRecovering means Redis restarted and the SKU is not yet verified
	// against the ledger; purchases are refused until it is.
	StatusRecovering SKUStatus = "recovering"
	// StatusRetired means the sale ended and its SKU left Redis entirely:
	// the ledger answers for it, and only a restore brings it back.
	StatusRetired SKUStatus = "retired"
)

// SKUDefinition is what an operator declares for a sale: the initial stock
// and how many units one user may hold at once.
type SKUDefinition struct {
	sku          SKUID
	initialStock int64
	perUserLimit int64
}

// NewSKUDefinition validates a SKU definition. Stock may be zero (a sale that
// is only stocked later by approved adjustments); the limit must be positive.
func NewSKUDefinition(sku SKUID, initialStock, perUserLimit int64) (SKUDefinition, error) {
	if sku.IsZero() {
		return SKUDefinition{}, NewFieldError("sku", ErrInvalidSKU)
	}
	if initialStock < 0 || initialStock > MaxQuantity {
		return SKUDefinition{}, NewFieldError("stock", ErrInvalidStock)
	}
	if perUserLimit <= 0 || perUserLimit > MaxQuantity {
		return SKUDefinition{}, NewFieldError("per_user_limit", ErrInvalidLimit)
	}
	return SKUDefinition{sku: sku, initialStock: initialStock, perUserLimit: perUserLimit}, nil
}

// SKU returns the definition's SKU id.
func (d SKUDefinition) SKU() SKUID { return d.sku }

// InitialStock returns the units the stocked event adds.
func (d SKUDefinition) InitialStock() int64 { return d.initialStock }

// PerUserLimit returns the most units one user may hold.
func (d SKUDefinition) PerUserLimit() int64 { return d.perUserLimit }

// CheckQuantity refuses a quantity no user could ever buy under this SKU's limit.
func (d SKUDefinition) CheckQuantity(q Quantity) error {
	if q.Int64() > d.perUserLimit {
		return NewFieldError("qty", ErrQuantityOverLimit)
	}
	return nil
}

// Receipt is the outcome of a successful deduction. A retry with the same
// request id returns the identical receipt (Original), marked Replayed.
type Receipt struct {
	SKU       string
	EventID   string
	Seq       int64
	Remaining int64
	Qty       int64
	User      string
	RequestID string
	// Replayed is true when this request id had already deducted: nothing
	// was bought now, and the fields above are the original receipt's.
	Replayed bool
	// Released is true, on a replay, when the deduction's units have been
	// released since: the caller no longer holds them.
	Released bool
}

// Original returns the receipt as the deduction first answered it, without
// what a replay adds: every replay of a request has the same Original.
func (r Receipt) Original() Receipt {
	r.Replayed, r.Released = false, false
	return r
}

// ReleaseReceipt says which event returned a deduction's units to stock, and
// whether that happened in this call or an earlier one.
type ReleaseReceipt struct {
	SKU             string
	RequestID       string
	EventID         string
	Seq             int64
	AlreadyReleased bool
}

// LedgerBalance is a SKU's row in the balances projection of the ledger.
type LedgerBalance struct {
	Stock int64
	// Held is the units of the SKU's open holds, out of Stock.
	Held      int64
	LastSeq   int64
	UpdatedAt time.Time
}

// LedgerSummary is what a SKU's ledger folds into, read in one snapshot
// together with its balances row, for reconciliation.
type LedgerSummary struct {
	Stock int64
	// Seq is the highest seq in the ledger; Count the number of rows. Count
	// below Seq means seqs are missing.
	Seq   int64
	Count int64
	// Holders is the number of users whose sold or held units count
	// against the per-user limit.
	Holders int64
	// Held is the units of open holds, and OpenHolds their number.
	Held      int64
	OpenHolds int64
	// OpenHoldIDs are the ids of the open holds, sorted: reserved with no
	// event that ended them.
	OpenHoldIDs []string
	// Deductions is the number of distinct request ids of deducted events:
	// Redis must hold a receipt for each.
	Deductions int64
	// Balance is the SKU's balances row, nil if there is none.
	Balance *LedgerBalance
}

// StockState is a SKU's live inventory as Redis holds it.
type StockState struct {
	SKU    string
	Stock  int64
	Seq    int64
	Limit  int64
	Status SKUStatus
	// Verified is true when the SKU was checked against the ledger under the
	// Redis run that holds it now.
	Verified bool
	// Held is the units of open holds, out of Stock.
	Held int64
	// Corrupt is true when Redis holds the SKU in a state that does not
	// read: the other figures are unknown, purchases answer unavailable,
	// and the SKU is being restored from the ledger.
	Corrupt bool
}
