package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// MemoryReport is what a lib sale cost Redis: used_memory before the sale
// and once the ledger caught up (stream entries within their retention
// included), the MEMORY USAGE of the SKU's own keys then, and, with
// --retire, the same after close, archive-buyers and retire. Per-purchase
// figures divide by the units sold.
type MemoryReport struct {
	UsedBefore      int64          `json:"used_memory_before"`
	UsedAfterSale   int64          `json:"used_memory_after_sale"`
	UsedPerPurchase float64        `json:"used_memory_per_purchase"`
	Keys            KeyBytes       `json:"sku_keys"`
	KeysPerPurchase KeyBytes       `json:"sku_keys_per_purchase"`
	Retired         *RetiredMemory `json:"after_retirement,omitempty"`
}

// KeyBytes is MEMORY USAGE by key of one SKU, or its share per purchase.
type KeyBytes struct {
	SKUHash  float64 `json:"sku_hash"`
	Buyers   float64 `json:"buyers"`
	Requests float64 `json:"requests"`
	Total    float64 `json:"total"`
}

// RetiredMemory is Redis after the SKU was retired: its keys' bytes, which
// must be 0, and the partition's tombstone set, shared by its retired SKUs.
type RetiredMemory struct {
	UsedMemory     int64 `json:"used_memory"`
	KeysBytes      int64 `json:"sku_keys_bytes"`
	TombstoneBytes int64 `json:"tombstone_set_bytes"`
}

func keyBytes(f Footprint, per float64) KeyBytes {
	k := KeyBytes{SKUHash: float64(f.SKUHash) / per, Buyers: float64(f.Buyers) / per, Requests: float64(f.Requests) / per}
	k.Total = k.SKUHash + k.Buyers + k.Requests
	return k
}

// measureMemory reads the SKU's footprint after its sale and, with
// retire, retires it and reads it again.
func measureMemory(ctx context.Context, lib Library, sku string, before Footprint, sold int64, retire bool, catchUp time.Duration) (*MemoryReport, error) {
	after, err := lib.Footprint(ctx, sku)
	if err != nil {
		return nil, err
	}
	per := float64(max(sold, 1))
	m := &MemoryReport{UsedBefore: before.UsedMemory, UsedAfterSale: after.UsedMemory,
		UsedPerPurchase: float64(after.UsedMemory-before.UsedMemory) / per, Keys: keyBytes(after, 1), KeysPerPurchase: keyBytes(after, per)}
	if !retire {
		return m, nil
	}
	if err := lib.Retire(ctx, sku, catchUp); err != nil {
		return m, fmt.Errorf("retire %s: %w", sku, err)
	}
	gone, err := lib.Footprint(ctx, sku)
	if err != nil {
		return m, err
	}
	m.Retired = &RetiredMemory{UsedMemory: gone.UsedMemory, KeysBytes: gone.SKUHash + gone.Buyers + gone.Requests, TombstoneBytes: gone.Tombstones}
	return m, nil
}

func (m *MemoryReport) print(w io.Writer) {
	k, p := m.Keys, m.KeysPerPurchase
	fmt.Fprintf(w, "  redis used_memory    %d -> %d bytes, %.0f B per purchase (stream entries within retention included)\n",
		m.UsedBefore, m.UsedAfterSale, m.UsedPerPurchase)
	fmt.Fprintf(w, "  sku keys             %.0f B: hash %.0f, buyers %.0f, requests %.0f\n", k.Total, k.SKUHash, k.Buyers, k.Requests)
	fmt.Fprintf(w, "  sku keys / purchase  %.1f B: hash %.2f, buyers %.1f, requests %.1f\n", p.Total, p.SKUHash, p.Buyers, p.Requests)
	if r := m.Retired; r != nil {
		fmt.Fprintf(w, "  after retirement     sku keys %d B, tombstone set %d B, used_memory %d\n", r.KeysBytes, r.TombstoneBytes, r.UsedMemory)
	}
}
