package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/ledger/reconcile"
)

func newReconcileCmd(withApp appRunner) *cobra.Command {
	var (
		sku, format string
		repair      bool
	)
	cmd := &cobra.Command{
		Use:   "reconcile [--sku S] [--repair] [--format table|json|csv]",
		Short: "Compare Redis with the ledger, report drift, and optionally repair it",
		Long: `reconcile compares, for every SKU (or --sku S), Redis's stock and seq with the
ledger's fold plus the events still in flight in the stream, and the balances
row with the fold. A difference the in-flight events explain is "lagging",
not drift. Every run and finding is recorded in reconciliation_runs and
reconciliation_findings.

With --repair it also corrects what it can: Redis stock by compare-and-set
(so a live sale is never disturbed), a Redis that lost state by restoring the
SKU from the ledger, balances by recomputing the row, and ledger gaps by
re-projecting from the stream where it still holds the events.

--format json prints the report as POST /v1/reconcile answers it, and --format
csv one line per finding. Exit status 3 when drift remains unrepaired, so
scripts and cron can alert.`,
		Example: "  invledger reconcile\n  invledger reconcile --sku phone-x --repair --format json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.CheckFormat(format); err != nil {
				return err
			}
			return withApp(cmd.Context(), withRedis|quietFindings, func(a *app.Application) error {
				rec := a.Reconciler
				opts := reconcile.Options{Repair: repair, Trigger: "cli"}
				if sku != "" {
					opts.SKUs = []string{sku}
				}
				rep, err := rec.Run(cmd.Context(), opts)
				if err != nil {
					return err
				}
				if format == output.Table {
					printReport(cmd.OutOrStdout(), rep)
				} else if err := output.Findings(cmd.OutOrStdout(), format, httpapi.NewReconcileReportJSON(rep), rep.Drifts); err != nil {
					return err
				}
				if unrepaired := len(rep.Drifts) - len(rep.Repaired); unrepaired > 0 {
					return errDrift{n: unrepaired}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "reconcile only this SKU")
	cmd.Flags().BoolVar(&repair, "repair", false, "repair the drift found")
	output.Flag(cmd.Flags(), &format)
	return cmd
}

// quietAlerts drops alerts: the CLI prints every finding itself.
type quietAlerts struct{}

var _ reconcile.Alerter = quietAlerts{}

func (quietAlerts) Alert(context.Context, reconcile.Finding) {}

// errDrift means the ledger and its views disagree where they must not;
// it exits with status 3.
type errDrift struct {
	n    int
	what string
}

func (e errDrift) Error() string {
	if e.what != "" {
		return fmt.Sprintf("%d %s", e.n, e.what)
	}
	return fmt.Sprintf("%d findings left unrepaired; run `invledger reconcile --repair`, or see reconciliation_findings", e.n)
}

func printReport(w io.Writer, rep reconcile.Report) {
	fmt.Fprintf(w, "reconciliation run %d: %d SKUs checked in %s, %d lagging, %d findings, %d repaired\n",
		rep.RunID, rep.Checked, rep.Finished.Sub(rep.Started).Round(time.Millisecond), rep.Lagging, len(rep.Drifts), len(rep.Repaired))
	for _, f := range rep.Drifts {
		state := "NOT repaired"
		switch {
		case f.Repaired:
			state = "repaired"
		case f.RepairError != "":
			state = "not repaired: " + f.RepairError
		}
		fmt.Fprintf(w, "  %-24s %-18s %s (%s)\n", f.SKU, f.Class, f.Detail, state)
		for _, r := range f.MissingSeqs {
			fmt.Fprintf(w, "  %-24s %-18s missing seqs %d-%d\n", "", "", r.From, r.To)
		}
		for _, l := range f.Lost {
			fmt.Fprintf(w, "  %-24s %-18s lost seq %d event %s request %s user %s\n", "", "", l.Seq, l.EventID, l.RequestID, l.User)
		}
	}
}
