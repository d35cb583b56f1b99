package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("dial tcp 127.0.0.1:6379: connection refused"), 1},
		{domain.ErrCorruptLedger, 1},
		{context.Canceled, 1},
		{domain.ErrSoldOut, 2},
		{domain.ErrAlreadyPurchased, 2},
		{domain.ErrNotWarmed, 2},
		{domain.ErrClosed, 2},
		{domain.ErrConflict, 2},
		{ledger.ErrSKUOpen, 2},
		{fmt.Errorf("sku x: %w", domain.ErrNotFound), 2},
		{domain.ErrNeedsRestore, 2},
		{domain.ErrSelfApproval, 2},
		{domain.ErrInsufficientStock, 2},
		{errDrift{n: 1}, 3},
		{domain.ErrRecovering, 4},
		{fmt.Errorf("deduct: %w", context.DeadlineExceeded), 4},
		{domain.NewFieldError("qty", domain.ErrInvalidQuantity), 5},
		{apiclient.ErrNotConfigured, 6},
		{fmt.Errorf("adjust list: %w", &client.Error{Status: 401, Code: "unauthorized"}), 6},
		{&client.Error{Status: 403, Code: "forbidden"}, 6},
		{&client.Error{Status: 403, Code: "self_approval"}, 2},
		{&client.Error{Status: 500, Code: "internal"}, 1},
		{usageError{errors.New(`unknown flag: --nope`)}, 64},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestRootUsageErrorsExit64 runs command lines that are wrong in
// themselves; none of them gets as far as connecting.
func TestRootUsageErrorsExit64(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"sku", "bogus"},
		{"--nope"},
		{"migrate", "--nope"},
		{"migrate", "extra"},
		{"sku", "warm"},
		{"deduct", "-z"},
	} {
		cmd := NewRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); exitCode(err) != exitUsage {
			t.Errorf("%v: %v (exit %d), want exit %d", args, err, exitCode(err), exitUsage)
		}
	}
	cmd := NewRootCmd()
	cmd.SetArgs([]string{"sku"})
	cmd.SetOut(io.Discard)
	if err := cmd.Execute(); err != nil {
		t.Errorf("a group command alone prints its help: %v", err)
	}
}
