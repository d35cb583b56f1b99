package apiclient

import (
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/client"
)

// AddFlags adds --api and --token to cmd, for it and its subcommands, into
// api and token: what New reads.
func AddFlags(cmd *cobra.Command, api, token *string) {
	cmd.PersistentFlags().StringVar(api, "api", "", "base URL of the invledger HTTP API (env INVLEDGER_API_URL)")
	cmd.PersistentFlags().StringVar(token, "token", "", "your bearer token for the API (env INVLEDGER_API_TOKEN; never shown)")
}

// RunJSON returns a command's RunE that opens the client from *api and
// *token when the command runs, calls do with it and prints do's answer as
// JSON. A refusal is do's error, unchanged, so the exit status classifies it.
func RunJSON[T any](api, token *string, do func(*cobra.Command, *client.Client) (T, error)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		c, err := New(*api, *token)
		if err != nil {
			return err
		}
		v, err := do(cmd, c)
		if err != nil {
			return err
		}
		return output.PrintJSON(cmd.OutOrStdout(), v)
	}
}
