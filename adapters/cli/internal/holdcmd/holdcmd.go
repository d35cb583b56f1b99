// Package holdcmd is `invledger hold`: reserve, confirm, cancel and show
// holds through the HTTP API, as the gateway token's principal.
package holdcmd

import (
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/adapters/cli/internal/cliflags"
	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/adapters/wire"
)

// Command returns the `hold` command and its subcommands. Each prints the
// hold as JSON; a refusal is an error matching its domain sentinel
// (domain.ErrHoldExpired, ...), so the CLI's exit status classifies it.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hold",
		Short: "Reserve units for a while, then confirm or cancel the hold (through the HTTP API)",
		Long: `A hold takes units out of available stock until it is confirmed (a sale),
cancelled, or its ttl runs out: then a sweeper in every API process gives the
units back by itself, exactly once. These commands act through the HTTP API:
set --api (INVLEDGER_API_URL) and --token (INVLEDGER_API_TOKEN) to a gateway
token (any reader may show).`,
	}
	var api, token, sku, hold string
	apiclient.AddFlags(cmd, &api, &token)
	cmd.PersistentFlags().StringVar(&sku, "sku", "", "the SKU (required)")
	_ = cmd.MarkPersistentFlagRequired("sku")

	var (
		user, requestID string
		qty, ttl        int64
	)
	reserve := &cobra.Command{
		Use:     "reserve --sku S --user U --qty N --request-id R [--ttl SECONDS]",
		Short:   "Hold units; a retry with the same request id returns the original hold",
		Example: "  invledger hold reserve --sku phone-x --user u42 --qty 1 --request-id order-7-line-1 --ttl 600",
		Args:    cobra.NoArgs,
		RunE: apiclient.RunJSON(&api, &token, func(cmd *cobra.Command, c *client.Client) (wire.HoldJSON, error) {
			if err := cliflags.CheckTTL(cmd, ttl); err != nil {
				return wire.HoldJSON{}, err
			}
			return c.Reserve(cmd.Context(), sku, user, qty, requestID, ttl)
		}),
	}
	reserve.Flags().StringVar(&user, "user", "", "buyer's user id")
	reserve.Flags().Int64Var(&qty, "qty", 1, "units to hold")
	reserve.Flags().StringVar(&requestID, "request-id", "", "idempotency key of the reserve")
	reserve.Flags().Int64Var(&ttl, "ttl", 0, "seconds until the hold expires (default: the server's, 900)")
	cliflags.MarkRequired(reserve, "user", "request-id")

	onHold := func(use, short string, do func(c *client.Client, cmd *cobra.Command) (wire.HoldJSON, error)) *cobra.Command {
		sub := &cobra.Command{Use: use + " --sku S --hold HOLD_ID", Short: short, Args: cobra.NoArgs,
			Example: "  invledger hold " + use + " --sku phone-x --hold e9d63f39-1dea-50d7-b46a-d42fe155889b",
			RunE:    apiclient.RunJSON(&api, &token, func(cmd *cobra.Command, c *client.Client) (wire.HoldJSON, error) { return do(c, cmd) })}
		sub.Flags().StringVar(&hold, "hold", "", "the hold id reserve printed")
		cliflags.MarkRequired(sub, "hold")
		return sub
	}
	cmd.AddCommand(reserve,
		onHold("confirm", "Make the hold a sale; repeating it gives the same answer",
			func(c *client.Client, cmd *cobra.Command) (wire.HoldJSON, error) {
				return c.ConfirmHold(cmd.Context(), sku, hold)
			}),
		onHold("cancel", "Give the hold's units back; repeating it gives the same answer",
			func(c *client.Client, cmd *cobra.Command) (wire.HoldJSON, error) {
				return c.CancelHold(cmd.Context(), sku, hold)
			}),
		onHold("show", "Show the hold; one past its deadline shows as expired",
			func(c *client.Client, cmd *cobra.Command) (wire.HoldJSON, error) {
				return c.Hold(cmd.Context(), sku, hold)
			}),
	)
	return cmd
}
