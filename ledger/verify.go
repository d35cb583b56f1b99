package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/invledger/invledger/domain"
)

// SealedRow is one seq of a SKU's chain: its ledger row and its seal, either
// of which may be missing (a row not sealed yet, or a sealed row that was
// deleted).
type SealedRow struct {
	SKU   string
	Seq   int64
	Event *domain.Event
	Seal  *domain.Seal
}

// ChainScanner reads the ledger's rows beside their seals.
type ChainScanner interface {
	// ScanChain calls fn for every seq that has a row or a seal, of sku or
	// of every SKU when sku is "", grouped by SKU and in seq order.
	ScanChain(ctx context.Context, sku string, fn func(SealedRow) error) error
}

// ChainReport is the outcome of verifying the tamper-evident chains.
type ChainReport struct {
	SKUs   int
	Events int64
	// Sealed counts the rows whose seal verified.
	Sealed int64
	Broken []BrokenChain
	// Unsealed lists the SKUs with rows the sealer has not linked yet.
	Unsealed []UnsealedChain
}

// BrokenChain names the first row of a SKU whose chain does not hold: the
// row that was edited, deleted or inserted out of order, or the first one
// after a removed link.
type BrokenChain struct {
	SKU    string
	Seq    int64
	Reason string
}

// UnsealedChain is a SKU whose rows after SealedTo wait for the sealer.
// When Missing is set, the seq after SealedTo is not in the ledger: the
// seal waits for it (an event still in flight), or stops there for good
// (an event Redis lost, which reconciliation reports).
type UnsealedChain struct {
	SKU      string
	SealedTo int64
	Rows     int64
	Missing  bool
}

// String says where the SKU's seal stands.
func (u UnsealedChain) String() string {
	if u.Missing {
		return fmt.Sprintf("%s: sealed to seq %d; seq %d is not in the ledger, %d later rows wait for it", u.SKU, u.SealedTo, u.SealedTo+1, u.Rows)
	}
	return fmt.Sprintf("%s: sealed to seq %d; %d rows wait for the sealer", u.SKU, u.SealedTo, u.Rows)
}

// VerifyChains recomputes every SKU's seals (or only sku's) from the
// ledger, link by link in seq order, and reports the first broken seq of
// each SKU and the rows not sealed yet. Both tables refuse UPDATE and
// DELETE, so a break means someone went around the database's own guard,
// e.g. as a superuser with triggers off. A row not sealed yet is reported
// as such: nothing vouches for it until the sealer links it.
func VerifyChains(ctx context.Context, chains ChainScanner, sku string, progress func(events int64)) (ChainReport, error) {
	if sku != "" {
		if _, err := domain.NewSKUID(sku); err != nil {
			return ChainReport{}, err
		}
	}
	var (
		rep      ChainReport
		current  string
		verifier domain.ChainVerifier
		broken   bool
		sealedTo int64
		pending  *UnsealedChain
	)
	endSKU := func() {
		if pending != nil && !broken {
			rep.Unsealed = append(rep.Unsealed, *pending)
		}
		pending = nil
	}
	breakAt := func(seq int64, reason string) {
		broken = true
		rep.Broken = append(rep.Broken, BrokenChain{SKU: current, Seq: seq, Reason: reason})
	}
	check := func(r SealedRow) error {
		if r.SKU != current {
			endSKU()
			current, verifier, broken, sealedTo = r.SKU, domain.ChainVerifier{}, false, 0
			rep.SKUs++
		}
		if r.Event != nil {
			rep.Events++
			if progress != nil && rep.Events%100_000 == 0 {
				progress(rep.Events)
			}
		}
		if broken {
			return nil
		}
		switch {
		case r.Event == nil:
			breakAt(r.Seq, fmt.Sprintf("sku %s seq %d is sealed but its row is gone from the ledger: deleted", r.SKU, r.Seq))
		case r.Seal == nil:
			if pending == nil {
				pending = &UnsealedChain{SKU: r.SKU, SealedTo: sealedTo, Missing: r.Seq != sealedTo+1}
			}
			pending.Rows++
		case pending != nil:
			breakAt(pending.SealedTo+1, fmt.Sprintf("sku %s seq %d is sealed but rows before it are not: a row inserted out of order, or a seal removed", r.SKU, r.Seq))
		default:
			if err := verifier.Check(*r.Event, *r.Seal); err != nil {
				if !errors.Is(err, domain.ErrCorruptLedger) {
					return err
				}
				breakAt(r.Seq, err.Error())
				return nil
			}
			sealedTo = r.Seq
			rep.Sealed++
		}
		return nil
	}
	if err := chains.ScanChain(ctx, sku, check); err != nil {
		return ChainReport{}, err
	}
	endSKU()
	if rep.Broken == nil {
		rep.Broken = []BrokenChain{}
	}
	return rep, nil
}
