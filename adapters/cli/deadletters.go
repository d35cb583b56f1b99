package cli

import (
	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/ledger"
)

func newDeadLettersCmd(withApp appRunner) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dead-letters",
		Short: "List, replay and resolve stream entries the projector could not project",
		Long: `replay projects an entry again as the projector would, once its cause is fixed
(idempotent by event id); resolve marks it handled with a note. Both record who.`,
	}
	var (
		q      ledger.DeadLetterQuery
		format string
	)
	list := &cobra.Command{
		Use:     "list [--status open|replayed|resolved] [--after ID] [--limit N] [--format table|json|csv]",
		Short:   "List dead letters, oldest first, a page at a time",
		Example: "  invledger dead-letters list --status open",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := output.CheckFormat(format); err != nil {
				return err
			}
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				page, err := a.DeadLetters.List(cmd.Context(), q)
				if err == nil {
					err = output.DeadLetters(cmd.OutOrStdout(), cmd.ErrOrStderr(), format, httpapi.NewDeadLetterPageJSON(page))
				}
				return err
			})
		},
	}
	list.Flags().StringVar(&q.Status, "status", "", "open, replayed or resolved")
	list.Flags().Int64Var(&q.After, "after", 0, "the next_after of the previous page")
	list.Flags().IntVar(&q.Limit, "limit", ledger.DefaultAuditLimit, "page size")
	output.Flag(list.Flags(), &format)

	act := func(use, short string, do func(cmd *cobra.Command, a *app.Application, id int64) (ledger.DeadLetter, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				id, err := parseID(args[0])
				if err != nil {
					return err
				}
				return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
					d, err := do(cmd, a, id)
					if err == nil {
						err = output.PrintJSON(cmd.OutOrStdout(), httpapi.NewDeadLetterJSON(d))
					}
					return err
				})
			},
		}
	}
	replay := act("replay ID", "Project a dead letter again, once its cause is fixed", func(cmd *cobra.Command, a *app.Application, id int64) (ledger.DeadLetter, error) {
		return a.DeadLetters.Replay(cmd.Context(), id)
	})
	var note string
	resolve := act("resolve ID --note TEXT", "Mark a dead letter handled without projecting it", func(cmd *cobra.Command, a *app.Application, id int64) (ledger.DeadLetter, error) {
		return a.DeadLetters.Resolve(cmd.Context(), id, note)
	})
	resolve.Flags().StringVar(&note, "note", "", "why it needs no replay")
	markRequired(resolve, "note")
	replay.Example = "  invledger dead-letters replay 7"
	resolve.Example = "  invledger dead-letters resolve 7 --note 'duplicate of event 6'"
	cmd.AddCommand(list, replay, resolve)
	return cmd
}
