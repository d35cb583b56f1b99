// Package ordercmd is `invledger order`: place, confirm, cancel and show
// orders of several SKUs through the HTTP API, as the gateway token's
// principal.
package ordercmd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/adapters/cli/internal/cliflags"
	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// Command returns the `order` command and its subcommands. Each prints the
// order as JSON; a refusal is an error matching its domain sentinel
// (domain.ErrSoldOut, domain.ErrHoldExpired, ...) and naming the line, so
// the CLI's exit status classifies it.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "order",
		Short: "Hold several SKUs at once, all or none, then confirm or cancel them together (through the HTTP API)",
		Long: `An order is one hold per line, each carrying the order id: placing it holds
every line or none, confirming it confirms every line or none, and a line not
confirmed in time expires by itself. These commands act through the HTTP API:
set --api (INVLEDGER_API_URL) and --token (INVLEDGER_API_TOKEN) to a gateway
token (any reader may show).`,
	}
	var api, token, order string
	apiclient.AddFlags(cmd, &api, &token)
	cmd.PersistentFlags().StringVar(&order, "order", "", "the order id (required)")
	_ = cmd.MarkPersistentFlagRequired("order")

	var (
		user  string
		lines []string
		ttl   int64
	)
	place := &cobra.Command{
		Use:     "place --order O --user U --line SKU:QTY [--line SKU:QTY ...] [--ttl SECONDS]",
		Short:   "Hold every line or none; a retry with the same order id returns the order",
		Example: "  invledger order place --order o-7 --user u42 --line phone-x:1 --line case-x:2 --ttl 600",
		Args:    cobra.NoArgs,
		RunE: apiclient.RunJSON(&api, &token, func(cmd *cobra.Command, c *client.Client) (wire.OrderJSON, error) {
			if err := cliflags.CheckTTL(cmd, ttl); err != nil {
				return wire.OrderJSON{}, err
			}
			parsed, err := ParseLines(lines)
			if err != nil {
				return wire.OrderJSON{}, err
			}
			return c.PlaceOrder(cmd.Context(), order, user, ttl, parsed)
		}),
	}
	place.Flags().StringVar(&user, "user", "", "buyer's user id")
	place.Flags().StringArrayVar(&lines, "line", nil, "a line of the order as SKU:QTY; repeat it for each SKU")
	place.Flags().Int64Var(&ttl, "ttl", 0, "seconds until the lines expire (default: the server's, 900)")
	cliflags.MarkRequired(place, "user", "line")

	onOrder := func(use, short string, do func(*cobra.Command, *client.Client) (wire.OrderJSON, error)) *cobra.Command {
		return &cobra.Command{Use: use + " --order O", Short: short, Args: cobra.NoArgs,
			Example: "  invledger order " + use + " --order o-7", RunE: apiclient.RunJSON(&api, &token, do)}
	}
	cmd.AddCommand(place,
		onOrder("confirm", "Confirm every line, or fail naming the line that cannot be and undo the others",
			func(cmd *cobra.Command, c *client.Client) (wire.OrderJSON, error) {
				return c.ConfirmOrder(cmd.Context(), order)
			}),
		onOrder("cancel", "Cancel every line still held; repeating it gives the same answer",
			func(cmd *cobra.Command, c *client.Client) (wire.OrderJSON, error) {
				return c.CancelOrder(cmd.Context(), order)
			}),
		onOrder("show", "Show the order and the state of each line's hold",
			func(cmd *cobra.Command, c *client.Client) (wire.OrderJSON, error) {
				return c.Order(cmd.Context(), order)
			}),
	)
	return cmd
}

// ParseLines reads --line values, each SKU:QTY (the SKU may itself hold a
// colon: the quantity follows the last one). A malformed value is a
// FieldError on "line" quoting it; the server checks the rest.
func ParseLines(values []string) ([]wire.OrderLineBody, error) {
	out := make([]wire.OrderLineBody, len(values))
	for i, v := range values {
		at := strings.LastIndexByte(v, ':')
		if at <= 0 {
			return nil, domain.NewFieldError("line", fmt.Errorf("%q is not SKU:QTY", v))
		}
		qty, err := strconv.ParseInt(v[at+1:], 10, 64)
		if err != nil {
			return nil, domain.NewFieldError("line", fmt.Errorf("%q: the quantity after the last ':' is not a whole number", v))
		}
		out[i] = wire.OrderLineBody{SKU: v[:at], Qty: qty}
	}
	return out, nil
}
