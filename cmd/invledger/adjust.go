package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/cmd/invledger/internal/apiclient"
	"github.com/invledger/invledger/cmd/invledger/internal/output"
	"github.com/invledger/invledger/domain"
)

func newAdjustCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "adjust",
		Short: "Request, approve, reject and list manual stock adjustments (through the HTTP API)",
		Long: `Every manual stock change goes through approval: one person requests it, a
different person approves it, and only then does it reach Redis, as an
adjusted event in the ledger that names both. A reconciliation of the SKU
runs right after.

These commands go through the HTTP API as the principal of your token, so
the second person is vouched for by the API's tokens, never by the command
line: set --api (INVLEDGER_API_URL) and --token (INVLEDGER_API_TOKEN).
Requesting needs an operator token, approving and rejecting an approver
token, listing any reader token.`,
	}
	var api, token string
	cmd.PersistentFlags().StringVar(&api, "api", "", "base URL of the invledger HTTP API (env INVLEDGER_API_URL)")
	cmd.PersistentFlags().StringVar(&token, "token", "", "your bearer token for the API (env INVLEDGER_API_TOKEN; never shown)")
	client := func() (*apiclient.Client, error) {
		if api == "" {
			api = os.Getenv("INVLEDGER_API_URL")
		}
		if token == "" {
			token = os.Getenv("INVLEDGER_API_TOKEN")
		}
		return apiclient.New(api, token)
	}
	call := func(cmd *cobra.Command, method, path string, body any) error {
		c, err := client()
		if err != nil {
			return err
		}
		var adj httpapi.AdjustmentJSON
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
		Use:   "request --sku S --delta N --reason TEXT",
		Short: "Request an adjustment; it changes nothing until approved",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return call(cmd, http.MethodPost, "/v1/adjustments", map[string]any{"sku": sku, "delta": delta, "reason": reason})
		},
	}
	request.Flags().StringVar(&sku, "sku", "", "SKU to adjust")
	request.Flags().Int64Var(&delta, "delta", 0, "signed change to available stock")
	request.Flags().StringVar(&reason, "reason", "", "why (required)")

	decide := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id < 1 {
					return domain.NewFieldError("id", errors.New("must be a positive integer"))
				}
				return call(cmd, http.MethodPost, fmt.Sprintf("/v1/adjustments/%d/%s", id, verb), nil)
			},
		}
	}
	approve := decide("approve", "Approve and apply an adjustment (not your own)")
	reject := decide("reject", "Reject a pending adjustment, or an approved one that could not be applied (not your own)")

	var (
		status string
		after  int64
		limit  int
	)
	list := &cobra.Command{
		Use:   "list [--status S] [--sku S] [--after ID] [--limit N]",
		Short: "List adjustments, newest first, one page at a time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			q := url.Values{}
			for name, v := range map[string]string{"status": status, "sku": sku} {
				if v != "" {
					q.Set(name, v)
				}
			}
			if after != 0 {
				q.Set("after", strconv.FormatInt(after, 10))
			}
			q.Set("limit", strconv.Itoa(limit))
			var page httpapi.AdjustmentPageJSON
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/adjustments?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-6s %-20s %8s %-9s %-14s %-14s %s\n", "ID", "SKU", "DELTA", "STATUS", "REQUESTED_BY", "DECIDED_BY", "REASON")
			for _, adj := range page.Adjustments {
				decided := "-"
				if adj.DecidedBy != nil {
					decided = *adj.DecidedBy
				}
				fmt.Fprintf(w, "%-6d %-20s %8d %-9s %-14s %-14s %s\n", adj.ID, adj.SKU, adj.Delta, adj.Status, adj.RequestedBy, decided, adj.Reason)
			}
			if page.NextAfter != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: run again with --after %d\n", *page.NextAfter)
			}
			return nil
		},
	}
	list.Flags().StringVar(&status, "status", "", "pending, approved, rejected, applied or failed")
	list.Flags().StringVar(&sku, "sku", "", "only this SKU")
	list.Flags().Int64Var(&after, "after", 0, "the next_after of the previous page (0: from the newest)")
	list.Flags().IntVar(&limit, "limit", 100, "page size, 1-1000")

	cmd.AddCommand(request, approve, reject, list)
	return cmd
}
