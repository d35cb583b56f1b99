package projections_test

import "github.com/invledger/invledger/ledger"

// deductCmd and releaseCmd build commands from strings a test knows are valid.
func deductCmd(sku, user string, qty int64, requestID string) ledger.DeductCommand {
	return mustCmd(ledger.NewDeductCommand(sku, user, qty, requestID))
}

func releaseCmd(sku, user, requestID, reason string) ledger.ReleaseCommand {
	return mustCmd(ledger.NewReleaseCommand(sku, user, requestID, reason))
}

func mustCmd[C any](cmd C, err error) C {
	if err != nil {
		panic(err)
	}
	return cmd
}
