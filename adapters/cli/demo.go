package cli

import (
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/cli/internal/demo"
)

func newDemoCmd() *cobra.Command {
	dc := demo.Config{Stock: 1000, Buyers: 20000, Concurrency: 200, RetryShare: 0.1, RepeatShare: 0.05}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a simulated flash sale against a private Redis and PostgreSQL",
		Long: `demo starts a private redis-server and PostgreSQL, runs the projector, and sells
--stock units to --buyers simulated buyers through the Go library, some of whom
retry or try twice. It shows live progress, then a summary: sold, refused by
reason, oversold (always 0), throughput, latency, and whether the ledger equals
Redis once the projection caught up.`,
		Example: "  invledger demo --stock 500 --buyers 10000 --concurrency 100",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := dc.Validate(); err != nil {
				return err
			}
			return demo.Run(cmd.Context(), dc, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&dc.Dir, "dir", "", "keep the servers' data here (default: a temporary directory, removed afterwards)")
	f.Int64Var(&dc.Stock, "stock", dc.Stock, "units on sale")
	f.IntVar(&dc.Buyers, "buyers", dc.Buyers, "distinct simulated buyers")
	f.IntVar(&dc.Concurrency, "concurrency", dc.Concurrency, "purchases in flight at once")
	f.Float64Var(&dc.RetryShare, "retry-share", dc.RetryShare, "share of buyers who retry the same request")
	f.Float64Var(&dc.RepeatShare, "repeat-share", dc.RepeatShare, "share of buyers who try to buy a second time")
	return cmd
}
