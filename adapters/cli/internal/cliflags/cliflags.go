// Package cliflags holds the flag conventions every invledger command
// follows, for package main and the command packages beside it.
package cliflags

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/domain"
)

// MarkRequired marks cmd's flags as required: leaving one out is a usage
// error naming it, and help says "(required)". It panics on a flag cmd does not
// have, a bug that the help tests catch.
func MarkRequired(cmd *cobra.Command, flags ...string) {
	for _, f := range flags {
		if err := cmd.MarkFlagRequired(f); err != nil {
			panic(err)
		}
		cmd.Flags().Lookup(f).Usage += " (required)"
	}
}

// CheckTTL refuses a --ttl given below 1 second, naming "ttl": left out
// (0), the server's default applies, so 0 cannot be asked for.
func CheckTTL(cmd *cobra.Command, ttl int64) error {
	if cmd.Flags().Changed("ttl") && ttl < 1 {
		return domain.NewFieldError("ttl", errors.New("must be at least 1 second; leave it out for the server's default"))
	}
	return nil
}
