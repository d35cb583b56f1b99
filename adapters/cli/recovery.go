package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/internal/progress"
)

func newRestoreRedisCmd(withApp appRunner) *cobra.Command {
	var (
		sku string
		all bool
	)
	cmd := &cobra.Command{
		Use:   "restore-redis --sku S | --all",
		Short: "Rebuild Redis from the ledger after Redis lost its data",
		Long: `restore-redis rebuilds each SKU's Redis state from its ledger: stock, seq,
per-user limit, status (closed sales come back closed), buyers, and the
receipt of every request, so retries still get their original receipts and
past buyers are still refused. It also recreates the partition streams and
the projector's consumer group.

It is safe while serve runs: each SKU is fenced first, so purchases of it are
answered "recovering" (503, retry) until its state is complete. A SKU that
Redis holds at a higher seq than the ledger is refused, because its newest
events are still being projected; wait for the projector and run it again.

Use it when warm answers needs_restore, or when reconcile reports a SKU that
Redis lost. With --all, progress goes to stderr about once a second.`,
		Example: "  invledger restore-redis --sku phone-x\n  invledger restore-redis --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				rec := a.Recovery
				if sku != "" {
					if err := rec.RestoreSKU(cmd.Context(), sku); err != nil {
						return err
					}
					v, err := a.Service.State(cmd.Context(), sku)
					if err != nil {
						return err
					}
					return output.PrintJSON(cmd.OutOrStdout(), map[string]any{"sku": sku, "restored": true,
						"redis_stock": v.RedisStock, "redis_seq": v.RedisSeq, "state": v.Status})
				}
				p := progress.NewPrinter(cmd.ErrOrStderr())
				report, err := rec.RestoreAll(cmd.Context(), func(done, total int, rows int64) {
					p.Print(done == total, "restore-redis: %d/%d skus, %d ledger rows, %.0f rows/s", done, total, rows, p.Rate(rows))
				})
				if perr := output.PrintJSON(cmd.OutOrStdout(), output.NewRestoreReportJSON(report)); perr != nil {
					return errors.Join(err, perr)
				}
				if err != nil {
					return fmt.Errorf("%d skus were not restored; the others were:\n%w", len(report.Failed), err)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "restore this SKU")
	cmd.Flags().BoolVar(&all, "all", false, "restore every SKU that has ledger events")
	cmd.MarkFlagsOneRequired("sku", "all")
	cmd.MarkFlagsMutuallyExclusive("sku", "all")
	return cmd
}

func newRebuildProjectionsCmd(withApp appRunner) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild-projections",
		Short: "Recompute the balances projection from the ledger",
		Long: `rebuild-projections recomputes every SKU's balances row (stock and last seq)
from ledger_entries, the truth, and prints which rows were wrong. Rows of SKUs
without ledger rows are removed.

It is safe while serve and its projector run: each SKU is recomputed in its
own transaction under the balances row lock the projector also takes, so no
projected event is lost or counted twice. Progress goes to stderr about once
a second.`,
		Example: "  invledger rebuild-projections",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				rec := a.Recovery
				p := progress.NewPrinter(cmd.ErrOrStderr())
				report, err := rec.RebuildBalances(cmd.Context(), func(done, total int) {
					p.Print(done == total, "rebuild-projections: %d/%d skus", done, total)
				})
				if perr := output.PrintJSON(cmd.OutOrStdout(), output.NewRebuildReportJSON(report)); perr != nil {
					return errors.Join(err, perr)
				}
				return err
			})
		},
	}
}

func newArchiveBuyersCmd(withApp appRunner) *cobra.Command {
	var (
		sku       string
		closedFor time.Duration
	)
	cmd := &cobra.Command{
		Use:   "archive-buyers --sku S | --closed-for DURATION",
		Short: "Move a closed sale's buyers from Redis to SQL",
		Long: `archive-buyers moves the buyers of a closed sale out of Redis, where the set
would otherwise grow without bound, into the buyer_archives tables, and
deletes them from Redis (a page at a time). Receipts of past requests stay, so retries and
releases keep working.

It only archives what the ledger vouches for. It refuses a SKU that is still
open (close it with "invledger sku close S"), one whose ledger has not caught
up with Redis (wait for the projector, or run reconcile), and one whose Redis
buyers differ from the ledger (reconcile first). Running it again is a no-op.

With --closed-for, it archives every SKU closed at least that long ago, e.g.
--closed-for 24h.`,
		Example: "  invledger archive-buyers --sku phone-x\n  invledger archive-buyers --closed-for 24h",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if closedFor < 0 {
				return fmt.Errorf("--closed-for must not be negative, got %s", closedFor)
			}
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				arch := a.Archiver
				if sku != "" {
					res, err := arch.ArchiveBuyers(cmd.Context(), sku)
					if err != nil {
						return err
					}
					return output.PrintJSON(cmd.OutOrStdout(), output.NewArchiveResultJSON(res))
				}
				results, err := arch.ArchiveClosed(cmd.Context(), closedFor)
				if perr := output.PrintJSON(cmd.OutOrStdout(), output.NewArchivedJSON(results)); perr != nil {
					return errors.Join(err, perr)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "archive this SKU's buyers")
	cmd.Flags().DurationVar(&closedFor, "closed-for", 0, "archive every SKU closed at least this long ago")
	cmd.MarkFlagsOneRequired("sku", "closed-for")
	cmd.MarkFlagsMutuallyExclusive("sku", "closed-for")
	return cmd
}

func newSKURetireCmd(withApp appRunner) *cobra.Command {
	return &cobra.Command{
		Use:   "retire SKU",
		Short: "Remove a finished sale from Redis, leaving a tombstone; the ledger answers for it",
		Long: `retire is the last step of a sale's life, after close and archive-buyers. It
removes every key of the SKU from Redis (its hash and the receipts of its
requests) and leaves the SKU's id in its partition's tombstone set.

It refuses, changing nothing, unless the SKU is closed, its buyers are
archived at its current seq, and a reconciliation finds the ledger equal to
Redis. The removal is one compare-and-set on that seq, so a late release is
never lost: the retirement refuses, and runs again once the release is
archived.

Afterwards a purchase is refused as closed, a retry of an old request_id gets
its original receipt from the ledger, and a release is refused as retired:
restore-redis --sku brings the SKU back for releases. serve retires closed
SKUs on its own after --retire-after (default 24h). Retiring again is a no-op.`,
		Example: "  invledger sku retire phone-x",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				res, err := a.Archiver.RetireSKU(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return output.PrintJSON(cmd.OutOrStdout(), output.NewRetireResultJSON(res))
			})
		},
	}
}

func newSKUCloseCmd(withApp appRunner) *cobra.Command {
	return &cobra.Command{
		Use:   "close SKU",
		Short: "End a SKU's sale: later deductions are refused as closed",
		Long: `close ends a SKU's sale. Later deductions are refused with "closed"; retries of
earlier requests still get their original receipts, and releases still return
stock. The closing time is recorded in PostgreSQL too, so a restore-redis
brings the SKU back closed. Closing again is a no-op that reports the original
closing time. Afterwards, archive-buyers can move its buyers out of Redis.`,
		Example: "  invledger sku close phone-x",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(cmd.Context(), withRedis, func(a *app.Application) error {
				arch := a.Archiver
				res, err := arch.CloseSKU(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return output.PrintJSON(cmd.OutOrStdout(), output.NewCloseResultJSON(res))
			})
		},
	}
}
