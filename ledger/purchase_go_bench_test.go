package ledger_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// answeringInventory answers every deduct at once, so BenchmarkDeductGoSide
// measures the Go side of a purchase around the inventory alone.
type answeringInventory struct{ ledger.Inventory }

func (answeringInventory) Deduct(_ context.Context, sku domain.SKUID, user domain.UserID, qty domain.Quantity, req domain.RequestID, eventID string) (domain.Receipt, error) {
	return domain.Receipt{SKU: sku.String(), EventID: eventID, Seq: 1, Qty: qty.Int64(), User: user.String(), RequestID: req.String()}, nil
}

// BenchmarkDeductGoSide is what the service adds to a purchase besides
// Redis: the command's validation, the event id, the metrics.
func BenchmarkDeductGoSide(b *testing.B) {
	m := ledger.NewInventoryMetrics(prometheus.NewRegistry())
	svc := ledger.NewService(m.Wrap(answeringInventory{}), nil, nil, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := strconv.Itoa(i)
		cmd, err := ledger.NewDeductCommand("bench-sku", id, 1, id)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Deduct(ctx, cmd); err != nil {
			b.Fatal(err)
		}
	}
}
