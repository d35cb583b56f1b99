// Package cliflags holds the flag conventions every invledger command
// follows, for package main and the command packages beside it.
package cliflags

import "github.com/spf13/cobra"

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
