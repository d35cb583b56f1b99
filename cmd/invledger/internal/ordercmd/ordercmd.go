// Package ordercmd is `invledger order`: place, confirm, cancel and show
// orders of several SKUs through the HTTP API, as the gateway token's
// principal.
package ordercmd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/adapters/httpclient"
	"github.com/invledger/invledger/cmd/invledger/internal/apiclient"
	"github.com/invledger/invledger/cmd/invledger/internal/cliflags"
	"github.com/invledger/invledger/cmd/invledger/internal/output"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
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
	cmd.PersistentFlags().StringVar(&api, "api", "", "base URL of the invledger HTTP API (env INVLEDGER_API_URL)")
	cmd.PersistentFlags().StringVar(&token, "token", "", "your bearer token for the API (env INVLEDGER_API_TOKEN; never shown)")
	cmd.PersistentFlags().StringVar(&order, "order", "", "the order id (required)")
	_ = cmd.MarkPersistentFlagRequired("order")
	run := func(do func(cmd *cobra.Command, c *httpclient.Client) (httpapi.OrderJSON, error)) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			c, err := apiclient.New(api, token)
			if err != nil {
				return err
			}
			o, err := do(cmd, c)
			if err != nil {
				return err
			}
			return output.PrintJSON(cmd.OutOrStdout(), o)
		}
	}

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
		RunE: run(func(cmd *cobra.Command, c *httpclient.Client) (httpapi.OrderJSON, error) {
			if cmd.Flags().Changed("ttl") && ttl < 1 {
				// 0 would ask the client for the server's default.
				return httpapi.OrderJSON{}, domain.NewFieldError("ttl", errors.New("must be at least 1 second; leave it out for the server's default"))
			}
			parsed, err := ParseLines(lines)
			if err != nil {
				return httpapi.OrderJSON{}, err
			}
			return c.PlaceOrder(cmd.Context(), order, user, ttl, parsed)
		}),
	}
	place.Flags().StringVar(&user, "user", "", "buyer's user id")
	place.Flags().StringArrayVar(&lines, "line", nil, "a line of the order as SKU:QTY; repeat it for each SKU")
	place.Flags().Int64Var(&ttl, "ttl", 0, "seconds until the lines expire (default: the server's, 900)")
	cliflags.MarkRequired(place, "user", "line")

	onOrder := func(use, short string, do func(c *httpclient.Client, cmd *cobra.Command) (httpapi.OrderJSON, error)) *cobra.Command {
		return &cobra.Command{Use: use + " --order O", Short: short, Args: cobra.NoArgs,
			Example: "  invledger order " + use + " --order o-7",
			RunE:    run(func(cmd *cobra.Command, c *httpclient.Client) (httpapi.OrderJSON, error) { return do(c, cmd) })}
	}
	cmd.AddCommand(place,
		onOrder("confirm", "Confirm every line, or fail naming the line that cannot be and undo the others",
			func(c *httpclient.Client, cmd *cobra.Command) (httpapi.OrderJSON, error) {
				return c.ConfirmOrder(cmd.Context(), order)
			}),
		onOrder("cancel", "Cancel every line still held; repeating it gives the same answer",
			func(c *httpclient.Client, cmd *cobra.Command) (httpapi.OrderJSON, error) {
				return c.CancelOrder(cmd.Context(), order)
			}),
		onOrder("show", "Show the order and the state of each line's hold",
			func(c *httpclient.Client, cmd *cobra.Command) (httpapi.OrderJSON, error) {
				return c.Order(cmd.Context(), order)
			}),
	)
	return cmd
}

// ParseLines reads --line values, each SKU:QTY (the SKU may itself hold a
// colon: the quantity follows the last one). A malformed value is a
// FieldError on "line" quoting it; the server checks the rest.
func ParseLines(values []string) ([]ledger.OrderLineInput, error) {
	out := make([]ledger.OrderLineInput, len(values))
	for i, v := range values {
		at := strings.LastIndexByte(v, ':')
		if at <= 0 {
			return nil, domain.NewFieldError("line", fmt.Errorf("%q is not SKU:QTY", v))
		}
		qty, err := strconv.ParseInt(v[at+1:], 10, 64)
		if err != nil {
			return nil, domain.NewFieldError("line", fmt.Errorf("%q: the quantity after the last ':' is not a whole number", v))
		}
		out[i] = ledger.OrderLineInput{SKU: v[:at], Qty: qty}
	}
	return out, nil
}
