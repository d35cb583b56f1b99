package domain_test

import (
	"testing"

	"github.com/invledger/invledger/domain"
)

func mustSKU(t testing.TB, s string) domain.SKUID {
	t.Helper()
	id, err := domain.NewSKUID(s)
	if err != nil {
		t.Fatalf("NewSKUID(%q): %v", s, err)
	}
	return id
}

func mustQty(t testing.TB, n int64) domain.Quantity {
	t.Helper()
	q, err := domain.NewQuantity(n)
	if err != nil {
		t.Fatalf("NewQuantity(%d): %v", n, err)
	}
	return q
}

func TestNewSKUDefinition(t *testing.T) {
	sku := mustSKU(t, "sku-1")
	tests := []struct {
		name     string
		sku      domain.SKUID
		stock    int64
		limit    int64
		field    string // "" means valid
		sentinel error
	}{
		{"typical", sku, 100, 1, "", nil},
		{"zero stock", sku, 0, 1, "", nil},
		{"max stock and limit", sku, domain.MaxQuantity, domain.MaxQuantity, "", nil},
		{"limit above stock", sku, 1, 5, "", nil},
		{"zero sku", domain.SKUID{}, 10, 1, "sku", domain.ErrInvalidSKU},
		{"negative stock", sku, -1, 1, "stock", domain.ErrInvalidStock},
		{"stock over max", sku, domain.MaxQuantity + 1, 1, "stock", domain.ErrInvalidStock},
		{"zero limit", sku, 10, 0, "per_user_limit", domain.ErrInvalidLimit},
		{"negative limit", sku, 10, -1, "per_user_limit", domain.ErrInvalidLimit},
		{"limit over max", sku, 10, domain.MaxQuantity + 1, "per_user_limit", domain.ErrInvalidLimit},
		// The sku is checked first, then stock, then the limit.
		{"zero sku and bad stock", domain.SKUID{}, -1, 0, "sku", domain.ErrInvalidSKU},
		{"bad stock and bad limit", sku, -1, 0, "stock", domain.ErrInvalidStock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := domain.NewSKUDefinition(tt.sku, tt.stock, tt.limit)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("NewSKUDefinition error = %v", err)
				}
				if d.SKU() != tt.sku || d.InitialStock() != tt.stock || d.PerUserLimit() != tt.limit {
					t.Errorf("got (%q, %d, %d), want (%q, %d, %d)",
						d.SKU(), d.InitialStock(), d.PerUserLimit(), tt.sku, tt.stock, tt.limit)
				}
				return
			}
			assertFieldErr(t, err, tt.field, tt.sentinel)
			if d != (domain.SKUDefinition{}) {
				t.Errorf("rejected definition is not zero: %+v", d)
			}
		})
	}
}

func TestCheckQuantity(t *testing.T) {
	d, err := domain.NewSKUDefinition(mustSKU(t, "sku-1"), 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		qty int64
		ok  bool
	}{
		{1, true},
		{2, true},
		{3, true},
		{4, false},
		{domain.MaxQuantity, false},
	}
	for _, tt := range tests {
		err := d.CheckQuantity(mustQty(t, tt.qty))
		if tt.ok {
			if err != nil {
				t.Errorf("CheckQuantity(%d) = %v, want nil", tt.qty, err)
			}
			continue
		}
		assertFieldErr(t, err, "qty", domain.ErrQuantityOverLimit)
	}

	// Quantity above stock but within the limit is not this check's business.
	big, err := domain.NewSKUDefinition(mustSKU(t, "sku-2"), 0, domain.MaxQuantity)
	if err != nil {
		t.Fatal(err)
	}
	if err := big.CheckQuantity(mustQty(t, domain.MaxQuantity)); err != nil {
		t.Errorf("CheckQuantity(MaxQuantity) with limit MaxQuantity = %v", err)
	}
}
