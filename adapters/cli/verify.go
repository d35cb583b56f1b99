package cli

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/output"
	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/progress"
	"github.com/invledger/invledger/ledger"
)

func newAuditVerifyCmd(withApp appRunner) *cobra.Command {
	var (
		sku, since string
		retired    []string
	)
	cmd := &cobra.Command{
		Use:   "verify [--sku S]",
		Short: "Check the ledger's tamper-evident chains and name the first broken seq",
		Long: `verify recomputes every SKU's chain (or --sku S's) from ledger_entries and
ledger_seals, where serve's sealer links each row, in seq order, as rows
become contiguous, over the link before it and the row's fields, its hold
and order included, and checks the sealer's keyed checkpoints of the chain
heads. With --seal-keys (INVLEDGER_SEAL_KEYS), the keys serve seals with,
old ones included, each keyed seal must be the HMAC-SHA256 of its row under
the key its key id names, so a row edited by someone without the key is
named by seq even if they recomputed the seals; unkeyed seals (release
1.0.0's sha256) are accepted only where a checkpoint vouches for them, and
a chain that ends before its checkpointed head lost its tail.
--since-checkpoint N:MAC, as an earlier verify printed it, also fails when
that checkpoint is gone: someone deleted everything written after it.

A seal or checkpoint under a key id verify was not given is broken (exit 3):
the id is a column anyone who edits the database can write. A key that was
destroyed in good faith is declared with --retired-seal-keys
(INVLEDGER_RETIRED_SEAL_KEYS), kept outside the database like the keys: what
it sealed is reported as not checked, and everything around it is checked.
Both tables
refuse UPDATE and DELETE themselves, so a break means someone went around
the database's guard, e.g. as a superuser with the triggers off. Rows the
sealer has not linked yet are listed, with the seq where a SKU's seal
waits when the next one is missing.

verify says what it checked: keyed and unkeyed rows, key ids, checkpoints.
A ledger with no keyed seal is reported as unkeyed: its chain resists no
one who can write the database. Exit status 3 when a chain or a checkpoint
is broken or the ledger was rolled back past --since-checkpoint; 1 when
verify cannot check (a keyed ledger and no key at all, or a key but no
checkpoint). Progress goes to stderr on long runs.`,
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
			var sinceRef *domain.CheckpointRef
			if since != "" {
				ref, err := domain.ParseCheckpointRef(since)
				if err != nil {
					return err
				}
				sinceRef = &ref
			}
			return withApp(cmd.Context(), sqlOnly, func(a *app.Application) error {
				keys, err := a.SealKeys.WithRetired(retired...)
				if err != nil {
					return domain.NewFieldError("--retired-seal-keys (INVLEDGER_RETIRED_SEAL_KEYS)", err)
				}
				p := progress.NewPrinter(cmd.ErrOrStderr())
				rep, err := ledger.VerifyChains(cmd.Context(), approot.Of(a).Adapters.Seals, ledger.VerifyOptions{SKU: sku, Keys: keys, Since: sinceRef,
					Progress: func(events int64) { p.Print(false, "verified %d events (%.0f/s)", events, p.Rate(events)) }})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				switch format {
				case output.Table:
					fmt.Fprintf(w, "verified %d events of %d SKUs (%d sealed): %d broken chains\n", rep.Events, rep.SKUs, rep.Sealed, len(rep.Broken))
					printChecked(w, rep)
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
				if format != output.Table && rep.Unprotected() {
					fmt.Fprintln(cmd.ErrOrStderr(), "UNKEYED: sha256 seals do not resist a database superuser; run serve with --seal-keys")
				}
				if format == output.CSV {
					for _, line := range []string{rep.BrokenCheckpoint, rep.Rollback} {
						if line != "" {
							fmt.Fprintf(cmd.ErrOrStderr(), "broken checkpoints: %s\n", line)
						}
					}
				}
				if len(rep.UnknownKeyIDs) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "key ids %s are neither given nor declared retired: tampered, unless serve sealed with them; then give verify those keys (--seal-keys, old ones included), or, for a key that was destroyed, declare it with --retired-seal-keys\n",
						strings.Join(rep.UnknownKeyIDs, ", "))
				}
				if !rep.Intact() {
					return errDrift{n: len(rep.Broken) + min(1, len(rep.BrokenCheckpoint)), what: "broken chains or checkpoints: the ledger was edited outside invledger; see the seqs above"}
				}
				return rep.CannotVerify()
			})
		},
	}
	cmd.Flags().StringVar(&sku, "sku", "", "verify only this SKU")
	cmd.Flags().StringVar(&since, "since-checkpoint", "", "N:MAC of a checkpoint an earlier verify printed, kept outside the database: fail unless the ledger still holds it")
	NewEnvFlags(cmd.Flags()).StringSlice(&retired, "retired-seal-keys", "INVLEDGER_RETIRED_SEAL_KEYS",
		"ids of seal keys destroyed in good faith, comma-separated: what they sealed is reported as not checked instead of broken")
	return cmd
}

// printChecked says what verify checked and with what: the algorithms, the
// key ids, how many rows each covered, the checkpoints, and plainly when
// the chain resists no one who can write the database.
func printChecked(w io.Writer, rep ledger.ChainReport) {
	ids := slices.Sorted(maps.Keys(rep.KeyIDs))
	var byKey []string
	for _, id := range ids {
		byKey = append(byKey, fmt.Sprintf("%s: %d", id, rep.KeyIDs[id]))
	}
	fmt.Fprintf(w, "  keyed (hmac-sha256): %d rows", rep.Keyed)
	if len(byKey) > 0 {
		fmt.Fprintf(w, " (key %s)", strings.Join(byKey, ", "))
	}
	fmt.Fprintf(w, "; unkeyed (sha256): %d rows\n", rep.Unkeyed)
	switch ref, ok := rep.Reference(); {
	case ok:
		fmt.Fprintf(w, "  checkpoints: %d verified, the newest %d of %s (key %s); keep --since-checkpoint %d:%s outside the database\n",
			rep.Checkpoints, ref.N, ref.At.UTC().Format(time.RFC3339), ref.KeyID, ref.N, ref.MAC[:16])
	case rep.Latest == 0:
		fmt.Fprintf(w, "  checkpoints: none\n")
	case rep.Newest.N < rep.Latest:
		fmt.Fprintf(w, "  checkpoints: %d verified, up to checkpoint %d of %d; no reference to keep: one older than a checkpoint verify could not check would let a rollback to that checkpoint pass\n",
			rep.Checkpoints, rep.Newest.N, rep.Latest)
	default:
		fmt.Fprintf(w, "  checkpoints: %d verified, the newest %d; no reference to keep from a ledger that is not intact\n", rep.Checkpoints, rep.Newest.N)
	}
	given := "none"
	if len(rep.KeysGiven) > 0 {
		given = strings.Join(rep.KeysGiven, ", ")
	}
	fmt.Fprintf(w, "  seal keys given: %s\n", given)
	if rep.Unprotected() {
		fmt.Fprintf(w, "  UNKEYED: sha256 seals do not resist a database superuser, who can edit a row and recompute them; run serve with --seal-keys\n")
	}
	for _, u := range rep.Unchecked {
		fmt.Fprintf(w, "  NOT CHECKED: %s\n", u)
	}
	for _, id := range slices.Sorted(maps.Keys(rep.Retired)) {
		fmt.Fprintf(w, "  not checked, retired key %s: %d rows (their links are checked, their fields cannot be)\n", id, rep.Retired[id])
	}
	if rep.RetiredCheckpoints > 0 {
		fmt.Fprintf(w, "  not checked, retired keys: %d checkpoints (their links are checked, their heads cannot be)\n", rep.RetiredCheckpoints)
	}
	for _, line := range []string{rep.BrokenCheckpoint, rep.Rollback} {
		if line != "" {
			fmt.Fprintf(w, "  broken checkpoints: %s\n", line)
		}
	}
}
