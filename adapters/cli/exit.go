package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/domain"
)

// Main runs root with the process's arguments until it ends or SIGINT or
// SIGTERM cancels it, and returns the exit status for os.Exit.
func Main(root *cobra.Command) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return execute(ctx, root, os.Args[1:], os.Stderr)
}

// execute runs root with args and returns the exit status. An error goes
// to stderr; after a usage error, so does the usage of the command at fault.
func execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "invledger:", err)
	if errors.As(err, new(usageError)) {
		fmt.Fprint(stderr, "\n"+cmd.UsageString())
	}
	return exitCode(err)
}

// Exit statuses, so scripts can tell what to do next without parsing the
// message.
const (
	exitOK        = 0
	exitInternal  = 1  // infrastructure failure or bug: see the message
	exitRefused   = 2  // a rule refused: sold out, limit reached, closed, not found...
	exitDrift     = 3  // reconciliation found drift it did not repair
	exitTransient = 4  // recovering or unavailable: retry with the same request id
	exitBadInput  = 5  // an invalid field, named in the message
	exitAuth      = 6  // a command through the API without its URL or token, or the API refused the token (401) or its role (403)
	exitUsage     = 64 // unknown command or flag, wrong arguments
)

// exitCode maps err to its exit status through domain.CodeOf, after the
// CLI's own two kinds: usage errors and reconciliation drift.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)):
		return exitUsage
	case errors.As(err, new(errDrift)):
		return exitDrift
	}
	switch domain.CodeOf(err) {
	case domain.CodeInvalidInput:
		return exitBadInput
	case domain.CodeSoldOut, domain.CodeAlreadyPurchased, domain.CodeNotWarmed, domain.CodeClosed, domain.CodeRetired,
		domain.CodeConflict, domain.CodeNotFound, domain.CodeNeedsRestore, domain.CodeSelfApproval,
		domain.CodeInsufficientStock, domain.CodeHoldExpired, domain.CodeHoldConfirmed, domain.CodeHoldCancelled,
		domain.CodeHoldReleased:
		return exitRefused
	case domain.CodeRecovering, domain.CodeUnavailable, domain.CodeUnsafeRedis:
		return exitTransient
	}
	if apiclient.Refused(err) {
		return exitAuth
	}
	return exitInternal
}

// usageError is a mistake in the command line itself, caught by cobra
// before anything runs.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// markUsageErrors makes every usage mistake under c a usageError: an
// unknown flag, arguments a command does not accept, and an unknown
// subcommand. A group command (one with subcommands and no action of its
// own) prints its help when run alone and refuses any argument, which
// cobra would otherwise answer with the help and status 0.
func markUsageErrors(c *cobra.Command) {
	if !c.HasParent() {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	}
	switch args := c.Args; {
	case c.HasSubCommands() && !c.Runnable():
		c.Args = unknownSubcommand
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	case args != nil:
		c.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markUsageErrors(sub)
	}
}

// unknownSubcommand refuses any argument to a group command, naming the
// closest subcommands.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError{errors.New(msg)}
}
