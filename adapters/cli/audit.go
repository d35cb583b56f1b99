package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// newAuditCmd is `invledger audit` with its query subcommands and any extra
// ones, e.g. `audit verify`. Every subcommand inherits --format.
func newAuditCmd(withApp appRunner, extra ...*cobra.Command) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Query the ledger: a SKU's history, buyers and stock at an instant; a user's purchases",
		Long: `audit answers questions from the append-only ledger, the truth, never from
Redis: they hold after Redis lost data and after archive-buyers.

Output is a table by default; --format json prints the same objects as the
HTTP API, and --format csv a header and one line per row for spreadsheets;
there, text that a spreadsheet would run as a formula (starting with = + - @)
gets a leading apostrophe. Paged commands print where the next page starts
on stderr.`,
	}
	output.Flag(cmd.PersistentFlags(), &format)
	cmd.AddCommand(newAuditHistoryCmd(withApp, &format), newAuditBuyersCmd(withApp, &format),
		newAuditBalanceAtCmd(withApp, &format), newAuditUserCmd(withApp, &format), newAuditOperationsCmd(withApp, &format))
	cmd.AddCommand(extra...)
	return cmd
}

func newAuditHistoryCmd(withApp appRunner, format *string) *cobra.Command {
	var q ledger.HistoryQuery
	cmd := &cobra.Command{
		Use:   "history SKU [--after SEQ] [--limit N]",
		Short: "List a SKU's ledger rows in seq order, a page at a time",
		Long: fmt.Sprintf(`history lists a SKU's ledger rows with every column, in seq order, starting
after --after (0: from the stocked event) and at most --limit rows (1-%d).
When more rows follow, stderr names the --after of the next page.`, ledger.MaxAuditLimit),
		Example: "  invledger audit history phone-x --limit 100\n  invledger audit history phone-x --after 100 --format csv",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPage(*format, q.Limit); err != nil {
				return err
			}
			q.SKU = args[0]
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				page, err := a.Auditor.History(cmd.Context(), q)
				if err != nil {
					return err
				}
				if err := writeEntries(cmd.OutOrStdout(), *format, httpapi.NewHistoryPageJSON(page), page.Events); err != nil {
					return err
				}
				if page.NextAfter != nil {
					output.NextPage(cmd.ErrOrStderr(), ptr(strconv.FormatInt(*page.NextAfter, 10)))
				}
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&q.After, "after", 0, "list rows with a seq above this one")
	cmd.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "most rows to list")
	return cmd
}

func newAuditBuyersCmd(withApp appRunner, format *string) *cobra.Command {
	var q ledger.BuyersQuery
	cmd := &cobra.Command{
		Use:   "buyers SKU [--after USER] [--limit N]",
		Short: "List who holds units of a SKU now, after releases, a page at a time",
		Long: fmt.Sprintf(`buyers lists the users who hold units of the SKU now, with how many: the
units each one bought (deducted, or reserved and confirmed) minus those
released, plus those in open holds, as the per-user limit counts them,
folded from the ledger. It also
answers after archive-buyers removed the buyers from Redis. Users come in
byte order of their ids, after --after, at most --limit of them (1-%d).
When more users follow, stderr names the --after of the next page.`, ledger.MaxAuditLimit),
		Example: "  invledger audit buyers phone-x --format json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPage(*format, q.Limit); err != nil {
				return err
			}
			q.SKU = args[0]
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				view, err := a.Auditor.Buyers(cmd.Context(), q)
				if err != nil {
					return err
				}
				rows := make([][]string, len(view.Buyers))
				for i, h := range view.Buyers {
					rows[i] = []string{h.UserID, strconv.FormatInt(h.Qty, 10)}
				}
				if err := output.Records(cmd.OutOrStdout(), *format, httpapi.NewBuyersJSON(view), []string{"user_id", "qty"}, rows); err != nil {
					return err
				}
				output.NextPage(cmd.ErrOrStderr(), view.NextAfter)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&q.After, "after", "", "list users after this user id, as a previous run printed it")
	cmd.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "most users to list")
	return cmd
}

func newAuditBalanceAtCmd(withApp appRunner, format *string) *cobra.Command {
	var at string
	cmd := &cobra.Command{
		Use:   "balance-at SKU --at RFC3339|now|-DURATION",
		Short: "Show a SKU's stock at an instant, folded from the ledger",
		Long: `balance-at folds the SKU's ledger rows that occurred at or before --at (an
RFC3339 instant such as 2026-05-01T12:00:00Z or 2026-05-01T20:00:00+08:00,
now, or a signed duration from now such as -5m)
into its stock then: stocked, deducted, released and adjusted rows each count
by their signed delta. Before the SKU was stocked it is 0.`,
		Example: "  invledger audit balance-at phone-x --at 2026-05-01T12:00:00Z\n  invledger audit balance-at phone-x --at -5m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.CheckFormat(*format); err != nil {
				return err
			}
			t, err := ledger.ParseInstant(at, time.Now())
			if err != nil {
				return err
			}
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				res, err := a.Auditor.BalanceAt(cmd.Context(), args[0], t)
				if err != nil {
					return err
				}
				return output.Records(cmd.OutOrStdout(), *format, httpapi.NewStockAtJSON(res), []string{"sku", "at", "stock"},
					[][]string{{res.SKU, res.At.Format(time.RFC3339Nano), strconv.FormatInt(res.Stock, 10)}})
			})
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the instant: RFC3339, now, or a signed duration from now such as -5m")
	markRequired(cmd, "at")
	return cmd
}

func newAuditUserCmd(withApp appRunner, format *string) *cobra.Command {
	var q ledger.UserQuery
	cmd := &cobra.Command{
		Use:   "user USER [--after CURSOR] [--limit N]",
		Short: "List one user's purchases, releases and holds across every SKU",
		Long: fmt.Sprintf(`user lists the user's purchases, releases and hold events in every SKU (with
each hold's id, status, deadline and order), oldest first, at
most --limit rows (1-%d). When more rows follow, stderr names the --after
cursor of the next page.`, ledger.MaxAuditLimit),
		Example: "  invledger audit user u1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPage(*format, q.Limit); err != nil {
				return err
			}
			q.User = args[0]
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				page, err := a.Auditor.UserEvents(cmd.Context(), q)
				if err != nil {
					return err
				}
				if err := writeEntries(cmd.OutOrStdout(), *format, httpapi.NewUserPageJSON(page), page.Events); err != nil {
					return err
				}
				output.NextPage(cmd.ErrOrStderr(), page.NextAfter)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&q.After, "after", "", "cursor of the next page, as a previous run printed it")
	cmd.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "most rows to list")
	return cmd
}

func newAuditOperationsCmd(withApp appRunner, format *string) *cobra.Command {
	var q ledger.OperationQuery
	cmd := &cobra.Command{
		Use:   "operations SKU [--after ID] [--limit N]",
		Short: "List who created, warmed, closed, archived, restored, repaired or rebuilt a SKU",
		Long: `operations lists the SKU's state changes, oldest first, each with its actor: an
API token's name, system:<component> or cli:<os user>. stderr names the next page.`,
		Example: "  invledger audit operations phone-x",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPage(*format, q.Limit); err != nil {
				return err
			}
			q.SKU = args[0]
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				page, err := a.Auditor.Operations(cmd.Context(), q)
				if err != nil {
					return err
				}
				rows := make([][]string, len(page.Operations))
				for i, op := range page.Operations {
					rows[i] = []string{strconv.FormatInt(op.ID, 10), op.SKU, string(op.Action), op.Actor, op.At.UTC().Format(time.RFC3339Nano), op.Detail}
				}
				err = output.Records(cmd.OutOrStdout(), *format, httpapi.NewOperationPageJSON(page), []string{"id", "sku", "action", "actor", "at", "detail"}, rows)
				if err == nil && page.NextAfter != nil {
					output.NextPage(cmd.ErrOrStderr(), ptr(strconv.FormatInt(*page.NextAfter, 10)))
				}
				return err
			})
		},
	}
	cmd.Flags().Int64Var(&q.After, "after", 0, "list operations with an id above this one")
	cmd.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "most rows to list")
	return cmd
}

var entryHeader = []string{"sku", "seq", "type", "delta", "qty", "balance_after", "user_id", "request_id",
	"actor", "reason", "occurred_at", "recorded_at", "stream_id", "event_id", "prev_hash", "hash",
	"hold_id", "status", "expires_at", "order_id"}

// writeEntries prints ledger rows; page, their JSON shape, is what --format
// json prints.
func writeEntries(w io.Writer, format string, page any, entries []ledger.AuditEntry) error {
	rows := make([][]string, len(entries))
	for i, e := range entries {
		rows[i] = []string{e.SKU, strconv.FormatInt(e.Seq, 10), string(e.Type), strconv.FormatInt(e.Delta, 10),
			strconv.FormatInt(e.Qty, 10), strconv.FormatInt(e.BalanceAfter, 10), e.UserID, e.RequestID,
			e.Actor, e.Reason, e.OccurredAt.UTC().Format(time.RFC3339Nano),
			e.RecordedAt.UTC().Format(time.RFC3339Nano), e.StreamID, e.EventID, e.PrevHash, e.Hash}
		rows[i] = append(rows[i], holdColumns(e)...)
	}
	return output.Records(w, format, page, entryHeader, rows)
}

// holdColumns are a hold's event's hold id, the status it gives the hold,
// its deadline (reserved only) and order id; a hold's events are its own
// and the release of its sale (status released). Empty for other events.
func holdColumns(e ledger.AuditEntry) []string {
	if e.HoldID == "" {
		return []string{"", "", "", ""}
	}
	status, expires := domain.HoldStatus(e.Type), ""
	if e.Type == domain.EventReserved {
		status = domain.HoldHeld
	}
	if e.ExpiresAt != nil {
		expires = e.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	return []string{e.HoldID, string(status), expires, e.OrderID}
}

// checkPage validates a paged read command's --format and --limit before
// anything connects, so a typo costs no round trip.
func checkPage(format string, limit int) error {
	return errors.Join(output.CheckFormat(format), ledger.CheckAuditLimit("--limit", limit))
}

func ptr[T any](v T) *T { return &v }
