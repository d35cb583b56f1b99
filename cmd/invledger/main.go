// Command invledger runs and operates the invledger inventory ledger: the
// purchase API, the projector, and the tools around them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/invledger/invledger/domain"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "invledger:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode lets scripts tell a refused purchase or bad input (2) and
// unrepaired reconciliation drift (3) from an infrastructure failure (1).
func exitCode(err error) int {
	if errors.As(err, new(errDrift)) {
		return 3
	}
	for _, refusal := range []error{domain.ErrInvalidInput, domain.ErrSoldOut, domain.ErrAlreadyPurchased,
		domain.ErrNotWarmed, domain.ErrNotFound, domain.ErrConflict, domain.ErrClosed, domain.ErrNeedsRestore,
		domain.ErrSelfApproval, domain.ErrInsufficientStock, domain.ErrRecovering} {
		if errors.Is(err, refusal) {
			return 2
		}
	}
	return 1
}
