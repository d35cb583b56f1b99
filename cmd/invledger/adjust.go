package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"

	"github.com/invledger/invledger/cmd/invledger/internal/output"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

func newAdjustCmd(withApp appRunner) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "adjust",
		Short: "Request, approve, reject and list manual stock adjustments",
		Long: `Every manual stock change goes through approval: one person requests it, a
different person approves it, and only then does it reach Redis, as an
adjusted event in the ledger that names both. A reconciliation of the SKU
runs right after. --as names who you are (default: your OS user name).`,
	}
	var as string
	cmd.PersistentFlags().StringVar(&as, "as", "", "your name, recorded as requester or approver (default: OS user)")
	who := func() (string, error) {
		if as != "" {
			return as, nil
		}
		if u, err := user.Current(); err == nil && u.Username != "" {
			return u.Username, nil
		}
		return "", errors.New("--as is required: name who requests or approves")
	}
	// Requests and lists need only PostgreSQL; a decision applies through
	// Redis and reconciles the SKU, printing rather than alerting.
	withFlow := func(cmd *cobra.Command, mode openMode, f func(flow *ledger.Adjustments, me string) error) error {
		me, err := who()
		if err != nil {
			return err
		}
		return withApp(cmd.Context(), mode, func(a *app.Application) error { return f(a.Adjustments, me) })
	}
	parseID := func(s string) (int64, error) {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return 0, domain.NewFieldError("id", errors.New("must be a positive integer"))
		}
		return id, nil
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
			return withFlow(cmd, sqlOnly, func(flow *ledger.Adjustments, me string) error {
				adj, err := flow.Request(cmd.Context(), sku, delta, reason, me)
				if err != nil {
					return err
				}
				return output.PrintJSON(cmd.OutOrStdout(), httpapi.NewAdjustmentJSON(adj))
			})
		},
	}
	request.Flags().StringVar(&sku, "sku", "", "SKU to adjust")
	request.Flags().Int64Var(&delta, "delta", 0, "signed change to available stock")
	request.Flags().StringVar(&reason, "reason", "", "why (required)")

	decide := func(use, short string, f func(*ledger.Adjustments) func(context.Context, int64, string) (domain.Adjustment, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return withFlow(cmd, withRedis|quietFindings, func(flow *ledger.Adjustments, me string) error {
					adj, err := f(flow)(cmd.Context(), id, me)
					if err != nil {
						if adj.ID != 0 {
							_ = output.PrintJSON(os.Stderr, httpapi.NewAdjustmentJSON(adj))
						}
						return err
					}
					return output.PrintJSON(cmd.OutOrStdout(), httpapi.NewAdjustmentJSON(adj))
				})
			},
		}
	}
	approve := decide("approve", "Approve and apply an adjustment (not your own)", func(f *ledger.Adjustments) func(context.Context, int64, string) (domain.Adjustment, error) {
		return f.Approve
	})
	reject := decide("reject", "Reject an adjustment (not your own)", func(f *ledger.Adjustments) func(context.Context, int64, string) (domain.Adjustment, error) {
		return f.Reject
	})

	var (
		status string
		limit  int
	)
	list := &cobra.Command{
		Use:   "list [--status S] [--sku S]",
		Short: "List adjustments, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				out, err := a.Adjustments.List(cmd.Context(), status, sku, limit)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%-6s %-20s %8s %-9s %-14s %-14s %s\n", "ID", "SKU", "DELTA", "STATUS", "REQUESTED_BY", "DECIDED_BY", "REASON")
				for _, adj := range out {
					decided := "-"
					if adj.DecidedBy != nil {
						decided = *adj.DecidedBy
					}
					fmt.Fprintf(w, "%-6d %-20s %8d %-9s %-14s %-14s %s\n", adj.ID, adj.SKU, adj.Delta, adj.Status, adj.RequestedBy, decided, adj.Reason)
				}
				return nil
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "pending, approved, rejected, applied or failed")
	list.Flags().StringVar(&sku, "sku", "", "only this SKU")
	list.Flags().IntVar(&limit, "limit", 100, "most rows to show")

	cmd.AddCommand(request, approve, reject, list)
	return cmd
}
