package main

import (
	"encoding/csv"
	"fmt"
	"strconv"

	"github.com/invledger/invledger/cmd/invledger/internal/output"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/runtime/app"
	"github.com/invledger/invledger/cmd/invledger/internal/progress"

	"github.com/invledger/invledger/ledger"
)

func newAuditVerifyCmd(withApp appRunner) *cobra.Command {
	var sku string
	cmd := &cobra.Command{
		Use:   "verify [--sku S]",
		Short: "Check the ledger's tamper-evident chains and name the first broken seq",
		Long: `verify recomputes every SKU's chain (or --sku S's) from ledger_entries and
ledger_seals, where serve's sealer links each row, in seq order, as rows
become contiguous: each seal's hash must equal sha256(prev_hash || the row's
fields, its hold and order included) and link to the seal before it. Both tables refuse UPDATE and DELETE
themselves, so a break means someone went around the database's guard, e.g.
as a superuser with the triggers off: an edited row, a deleted one and one
inserted out of order are each named by seq. Rows the sealer has not linked
yet are listed, with the seq where a SKU's seal waits when the next one is
missing. Exit status 3 when a chain is broken. Progress goes to stderr on
long runs.`,
		Example: "  invledger audit verify\n  invledger audit verify --sku phone-x --format json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := cmd.Flags().GetString("format")
			if err != nil {
				return err
			}
			if err := output.CheckFormat(format); err != nil {
				return err
			}
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				p := progress.NewPrinter(cmd.ErrOrStderr())
				rep, err := ledger.VerifyChains(cmd.Context(), a.Adapters.Seals, sku, func(events int64) {
					p.Print(false, "verified %d events (%.0f/s)", events, p.Rate(events))
				})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				switch format {
				case output.Table:
					fmt.Fprintf(w, "verified %d events of %d SKUs (%d sealed): %d broken chains\n", rep.Events, rep.SKUs, rep.Sealed, len(rep.Broken))
					for _, b := range rep.Broken {
						fmt.Fprintf(w, "  %s: first broken at seq %d: %s\n", b.SKU, b.Seq, b.Reason)
					}
					for _, u := range rep.Unsealed {
						fmt.Fprintf(w, "  not sealed yet: %s\n", u)
					}
				case output.CSV:
					out := csv.NewWriter(w)
					_ = out.Write([]string{"sku", "seq", "reason"})
					for _, b := range rep.Broken {
						_ = out.Write([]string{b.SKU, strconv.FormatInt(b.Seq, 10), b.Reason})
					}
					out.Flush()
					if err := out.Error(); err != nil {
						return err
					}
				default:
					if err := output.PrintJSON(w, output.NewChainReportJSON(rep)); err != nil {
						return err
					}
				}
				if len(rep.Broken) > 0 {
					return errDrift{n: len(rep.Broken), what: "broken chains: the ledger was edited outside invledger; see the seqs above"}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "verify only this SKU")
	return cmd
}
