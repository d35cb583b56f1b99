package ledger

import (
	"context"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// SKUListing is a SKU's definition with its balances row, nil before the
// first projection, and whether it is retired.
type SKUListing struct {
	Definition domain.SKUDefinition
	Balance    *domain.LedgerBalance
	Retired    bool
}

// SKUPager pages through the defined SKUs.
type SKUPager interface {
	// Page returns up to limit SKUs whose ids come after after ("" from
	// the first) in byte order, each with its balances row, in one query.
	Page(ctx context.Context, after string, limit int) ([]SKUListing, error)
}

// InventoryStates reads the live inventory of many SKUs at once.
type InventoryStates interface {
	// States returns the live state of every SKU of skus that Redis holds,
	// read in one pipelined round trip; SKUs not warmed are absent.
	States(ctx context.Context, skus []domain.SKUID) (map[domain.SKUID]domain.StockState, error)
}

// Catalog lists the defined SKUs with their state in Redis and in the
// ledger, a page at a time.
type Catalog struct {
	skus      SKUPager
	inventory InventoryStates
}

// NewCatalog wires a Catalog to its ports.
func NewCatalog(skus SKUPager, inventory InventoryStates) *Catalog {
	return &Catalog{skus: skus, inventory: inventory}
}

// SKUListQuery asks for the SKUs whose ids come after After (a previous
// page's next_after; empty: from the first), at most Limit of them (0:
// DefaultAuditLimit).
type SKUListQuery struct {
	After string
	Limit int
}

// SKUPage is one page of SKUs in byte order of their ids, each as State
// shows it but without the watermark; SKUs is empty, never nil, past the
// last SKU. NextAfter is the After of the next
// page, nil on the last one.
type SKUPage struct {
	SKUs      []SKUView
	NextAfter *string
}

// List returns a page of SKUs: their definitions and balances in one
// query, their Redis state in one pipeline. An After that is not a SKU id
// is a *domain.FieldError naming "after"; a bad Limit one naming "limit".
func (c *Catalog) List(ctx context.Context, q SKUListQuery) (SKUPage, error) {
	if q.After != "" {
		if _, err := domain.NewSKUID(q.After); err != nil {
			return SKUPage{}, domain.NewFieldError("after", fmt.Errorf("%w: %w", errCursor, err))
		}
	}
	limit, err := auditLimit(q.Limit)
	if err != nil {
		return SKUPage{}, err
	}
	listings, err := c.skus.Page(ctx, q.After, limit+1)
	if err != nil {
		return SKUPage{}, err
	}
	var page SKUPage
	if len(listings) > limit {
		listings = listings[:limit]
		next := listings[limit-1].Definition.SKU().String()
		page.NextAfter = &next
	}
	ids := make([]domain.SKUID, len(listings))
	for i, l := range listings {
		ids[i] = l.Definition.SKU()
	}
	live, err := c.inventory.States(ctx, ids)
	if err != nil {
		return SKUPage{}, err
	}
	page.SKUs = make([]SKUView, len(listings))
	for i, l := range listings {
		v := SKUView{Definition: l.Definition, Status: domain.StatusNotWarmed}
		if st, ok := live[ids[i]]; ok {
			v.setLive(st)
		} else if l.Retired {
			v.Status = domain.StatusRetired
		}
		if l.Balance != nil {
			v.LedgerStock, v.LedgerSeq = &l.Balance.Stock, &l.Balance.LastSeq
		}
		page.SKUs[i] = v
	}
	return page, nil
}
