package cli

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/apiclient"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

func newAdjustCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "adjust",
		Short: "Request, approve, reject and list manual stock adjustments (through the HTTP API)",
		Long: `Every manual stock change needs two people: one requests it, another approves
it; only then does it reach Redis, as an adjusted event naming both, and the
SKU is reconciled. These commands act through the HTTP API as your token's
principal (operator: request; approver: approve, reject; any reader: list):
set --api (INVLEDGER_API_URL) and --token (INVLEDGER_API_TOKEN).`,
	}
	var api, token string
	cmd.PersistentFlags().StringVar(&api, "api", "", "base URL of the invledger HTTP API (env INVLEDGER_API_URL)")
	cmd.PersistentFlags().StringVar(&token, "token", "", "your bearer token for the API (env INVLEDGER_API_TOKEN; never shown)")
	call := func(cmd *cobra.Command, method, path string, body any) error {
		c, err := apiclient.New(api, token)
		if err != nil {
			return err
		}
		var adj wire.AdjustmentJSON
		if err := c.Do(cmd.Context(), method, path, body, &adj); err != nil {
			return err
		}
		return output.PrintJSON(cmd.OutOrStdout(), adj)
	}

	var (
		sku    string
		delta  int64
		reason string
	)
	request := &cobra.Command{
		Use:     "request --sku S --delta N --reason TEXT",
		Short:   "Request an adjustment; it changes nothing until approved",
		Example: "  invledger adjust request --sku phone-x --delta 5 --reason 'found 5 in the warehouse'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd, http.MethodPost, "/v1/adjustments", map[string]any{"sku": sku, "delta": delta, "reason": reason})
		},
	}
	request.Flags().StringVar(&sku, "sku", "", "SKU to adjust")
	request.Flags().Int64Var(&delta, "delta", 0, "signed change to available stock")
	request.Flags().StringVar(&reason, "reason", "", "why")
	markRequired(request, "sku", "delta", "reason")

	decide := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use:     verb + " ID",
			Short:   short,
			Example: "  invledger adjust " + verb + " 1",
			Args:    cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return call(cmd, http.MethodPost, fmt.Sprintf("/v1/adjustments/%d/%s", id, verb), nil)
			},
		}
	}
	approve := decide("approve", "Approve and apply an adjustment (not your own)")
	reject := decide("reject", "Reject a pending adjustment, or an approved one that could not be applied (not your own)")

	var (
		status, format string
		after          int64
		limit          int
	)
	list := &cobra.Command{
		Use:     "list [--status S] [--sku S] [--after ID] [--limit N] [--format table|json|csv]",
		Short:   "List adjustments, newest first, one page at a time",
		Example: "  invledger adjust list --status pending --format json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.CheckFormat(format); err != nil {
				return err
			}
			c, err := apiclient.New(api, token)
			if err != nil {
				return err
			}
			page, err := c.Adjustments(cmd.Context(), status, sku, after, limit)
			if err == nil {
				err = output.Adjustments(cmd.OutOrStdout(), cmd.ErrOrStderr(), format, page)
			}
			return err
		},
	}
	list.Flags().StringVar(&status, "status", "", "pending, approved, rejected, applied or failed")
	list.Flags().StringVar(&sku, "sku", "", "only this SKU")
	list.Flags().Int64Var(&after, "after", 0, "the next_after of the previous page (0: from the newest)")
	list.Flags().IntVar(&limit, "limit", 100, "page size, 1-1000")
	output.Flag(list.Flags(), &format)

	cmd.AddCommand(request, approve, reject, list)
	return cmd
}

// parseID parses a positive integer id argument.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, domain.NewFieldError("id", errors.New("must be a positive integer"))
	}
	return id, nil
}
