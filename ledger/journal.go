package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/invledger/invledger/domain"
)

// ReceiptJournal remembers the sales this process acknowledged in the last
// Window: deductions and confirmed holds. With Redis in everysec mode a
// crash can lose the last second of acknowledged sales from both Redis and
// its stream; the ledger never saw them, so only the process that
// acknowledged them can name them. Reserves, cancels and expiries are not
// journaled: a lost reserve leaves no hold, so its confirm is refused and
// the buyer learns of it there, and a lost cancel or expiry leaves a hold
// that expires again at its deadline. The
// reconciler asks the journal, when it verifies a SKU after a restart, which
// receipts lie beyond what Redis and the ledger still hold, and reports them
// as lost with their request and event ids.
type ReceiptJournal struct {
	window time.Duration
	mu     sync.Mutex
	bySKU  map[string][]journaled
}

type journaled struct {
	at      time.Time
	receipt domain.Receipt
}

// NewReceiptJournal keeps receipts for window; a few seconds covers the
// everysec loss window with margin.
func NewReceiptJournal(window time.Duration) *ReceiptJournal {
	return &ReceiptJournal{window: window, bySKU: map[string][]journaled{}}
}

// Wrap returns inv with every successful deduction journaled.
func (j *ReceiptJournal) Wrap(inv Inventory) Inventory {
	return &journaledInventory{Inventory: inv, j: j}
}

type journaledInventory struct {
	Inventory
	j *ReceiptJournal
}

func (ji *journaledInventory) Deduct(ctx context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	rc, err := ji.Inventory.Deduct(ctx, sku, user, qty, req, eventID)
	if err == nil {
		ji.j.record(rc)
	}
	return rc, err
}

// WrapOrders returns inv with every successful confirm journaled, as the
// receipt of the sale it made: the confirmed event's seq and id.
func (j *ReceiptJournal) WrapOrders(inv OrderInventory) OrderInventory {
	return &journaledOrders{OrderInventory: inv, j: j}
}

type journaledOrders struct {
	OrderInventory
	j *ReceiptJournal
}

func (jo *journaledOrders) ConfirmHold(ctx context.Context, sku domain.SKUID, hold domain.HoldID, eventID string) (domain.Hold, error) {
	h, err := jo.OrderInventory.ConfirmHold(ctx, sku, hold, eventID)
	if err == nil {
		jo.j.record(domain.Receipt{SKU: h.SKU, EventID: h.EndEventID, Seq: h.EndSeq, Remaining: h.Remaining, Qty: h.Qty,
			User: h.User, RequestID: h.RequestID})
	}
	return h, err
}

func (j *ReceiptJournal) record(rc domain.Receipt) {
	now := time.Now()
	j.mu.Lock()
	defer j.mu.Unlock()
	list := j.bySKU[rc.SKU]
	// Entries arrive roughly in time order; drop the expired head.
	drop := 0
	for drop < len(list) && now.Sub(list[drop].at) > j.window {
		drop++
	}
	j.bySKU[rc.SKU] = append(list[drop:], journaled{at: now, receipt: rc})
}

// TakeBeyond removes and returns the journaled receipts of sku with a seq
// above seq: acknowledged, yet absent from a Redis and ledger that end at seq.
func (j *ReceiptJournal) TakeBeyond(sku string, seq int64) []domain.Receipt {
	j.mu.Lock()
	defer j.mu.Unlock()
	var lost []domain.Receipt
	seen := map[string]bool{} // a retried request journals its receipt again
	kept := j.bySKU[sku][:0]
	for _, e := range j.bySKU[sku] {
		if e.receipt.Seq > seq {
			if !seen[e.receipt.EventID] {
				seen[e.receipt.EventID] = true
				lost = append(lost, e.receipt)
			}
		} else {
			kept = append(kept, e)
		}
	}
	j.bySKU[sku] = kept
	return lost
}
