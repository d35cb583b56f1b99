package ledger

import (
	"context"
	"errors"

	"github.com/invledger/invledger/domain"
)

// ChainReport is the outcome of verifying the tamper-evident chains.
type ChainReport struct {
	SKUs   int
	Events int64
	Broken []BrokenChain
}

// BrokenChain names the first event of a SKU whose chain does not hold: the
// row that was edited, or the first one after an edited or removed row.
type BrokenChain struct {
	SKU    string
	Seq    int64
	Reason string
}

// VerifyChains recomputes every SKU's chain (or only sku's) from the ledger,
// hash by hash in seq order, and reports the first broken seq of each SKU.
// The ledger table refuses UPDATE and DELETE, so a break means someone went
// around the database's own guard, e.g. as a superuser with triggers off.
func VerifyChains(ctx context.Context, ledger LedgerScanner, sku string, progress func(events int64)) (ChainReport, error) {
	var (
		rep      ChainReport
		current  string
		verifier domain.ChainVerifier
		broken   bool
	)
	check := func(e domain.Event) error {
		if e.SKU != current {
			current, verifier, broken = e.SKU, domain.ChainVerifier{}, false
			rep.SKUs++
		}
		rep.Events++
		if progress != nil && rep.Events%100_000 == 0 {
			progress(rep.Events)
		}
		if broken {
			return nil
		}
		if err := verifier.Check(e); err != nil {
			broken = true
			var reason string
			if errors.Is(err, domain.ErrCorruptLedger) {
				reason = err.Error()
			}
			rep.Broken = append(rep.Broken, BrokenChain{SKU: e.SKU, Seq: e.Seq, Reason: reason})
		}
		return nil
	}
	var err error
	if sku == "" {
		err = ledger.ScanAll(ctx, check)
	} else {
		id, idErr := domain.NewSKUID(sku)
		if idErr != nil {
			return ChainReport{}, idErr
		}
		err = ledger.ScanSKU(ctx, id, check)
	}
	if err != nil {
		return ChainReport{}, err
	}
	if rep.Broken == nil {
		rep.Broken = []BrokenChain{}
	}
	return rep, nil
}
