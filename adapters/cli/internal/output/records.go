package output

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger/reconcile"
)

// Output formats of the read commands.
const (
	Table = "table"
	JSON  = "json"
	CSV   = "csv"
)

// Formats lists every output format.
var Formats = []string{Table, JSON, CSV}

// CheckFormat validates --format before anything connects, so a typo costs
// no round trip and exits with the status of other bad input.
func CheckFormat(f string) error {
	if !slices.Contains(Formats, f) {
		return domain.NewFieldError("--format", fmt.Errorf("must be one of %s, got %q", strings.Join(Formats, ", "), f))
	}
	return nil
}

// Records prints v as JSON, or header and rows as CSV or as a table.
func Records(w io.Writer, format string, v any, header []string, rows [][]string) error {
	switch format {
	case JSON:
		return PrintJSON(w, v)
	case CSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(header); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		for _, row := range rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = csvSafe(c)
			}
			if err := cw.Write(cells); err != nil {
				return fmt.Errorf("write csv: %w", err)
			}
		}
		cw.Flush()
		if err := cw.Error(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(header, "\t")))
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			// An empty cell would shift the eye to the next column; tabs
			// and newlines in free text would break the table's shape.
			cells[i] = cmp.Or(tableSpace.Replace(c), "-")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

var tableSpace = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

// csvSafe defuses a cell that a spreadsheet would run as a formula when an
// auditor opens the export: user ids, request ids and reasons come from
// outside. A leading apostrophe makes spreadsheets show the text as it is.
// Integers, such as a negative delta, are left alone.
func csvSafe(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return s
	}
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return s
	}
	return "'" + s
}

// PrintJSON prints v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Flag registers --format on fs, defaulting to a table.
func Flag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "format", Table, "output format: table, json or csv")
}

// Adjustments prints a page of adjustments in format on w (--format json:
// as GET /v1/adjustments answers it), and where the next page starts on more.
func Adjustments(w, more io.Writer, format string, page wire.AdjustmentPageJSON) error {
	rows := make([][]string, len(page.Adjustments))
	for i, a := range page.Adjustments {
		decided := ""
		if a.DecidedBy != nil {
			decided = *a.DecidedBy
		}
		rows[i] = []string{strconv.FormatInt(a.ID, 10), a.SKU, strconv.FormatInt(a.Delta, 10), a.Status, a.RequestedBy, decided, a.Reason}
	}
	if err := Records(w, format, page, []string{"id", "sku", "delta", "status", "requested_by", "decided_by", "reason"}, rows); err != nil {
		return err
	}
	if page.NextAfter != nil {
		next := strconv.FormatInt(*page.NextAfter, 10)
		NextPage(more, &next)
	}
	return nil
}

// DeadLetters prints a page of dead letters in format on w (--format json:
// as GET /v1/dead-letters answers it), and where the next page starts on more.
func DeadLetters(w, more io.Writer, format string, page wire.DeadLetterPageJSON) error {
	rows := make([][]string, len(page.DeadLetters))
	for i, d := range page.DeadLetters {
		rows[i] = []string{strconv.FormatInt(d.ID, 10), d.Stream, d.StreamID, d.Status, d.CreatedAt.UTC().Format(time.RFC3339Nano), d.Error}
	}
	if err := Records(w, format, page, []string{"id", "stream", "stream_id", "status", "created_at", "error"}, rows); err != nil {
		return err
	}
	if page.NextAfter != nil {
		next := strconv.FormatInt(*page.NextAfter, 10)
		NextPage(more, &next)
	}
	return nil
}

// Findings prints a reconciliation's findings as CSV, or report, the body
// of POST /v1/reconcile, as JSON; the table is the command's own summary.
func Findings(w io.Writer, format string, report any, findings []reconcile.Finding) error {
	rows := make([][]string, len(findings))
	for i, f := range findings {
		rows[i] = []string{f.SKU, string(f.Class), f.Detail, strconv.FormatBool(f.Repaired), f.RepairError}
	}
	return Records(w, format, report, []string{"sku", "class", "detail", "repaired", "repair_error"}, rows)
}

// skuHeader is the columns of SKUs, in GET /v1/skus' field order.
var skuHeader = []string{"sku", "initial_stock", "per_user_limit", "state", "redis_stock", "redis_seq", "ledger_stock", "ledger_seq"}

// SKUs prints a page of `sku list`: as GET /v1/skus answers it with --format
// json, else one row per SKU, with an empty cell where the API has null.
func SKUs(w io.Writer, format string, page wire.SKUPageJSON) error {
	rows := make([][]string, len(page.SKUs))
	opt := func(n *int64) string {
		if n == nil {
			return ""
		}
		return strconv.FormatInt(*n, 10)
	}
	for i, s := range page.SKUs {
		rows[i] = []string{s.SKU, strconv.FormatInt(s.InitialStock, 10), strconv.FormatInt(s.PerUserLimit, 10), s.State,
			opt(s.RedisStock), opt(s.RedisSeq), opt(s.LedgerStock), opt(s.LedgerSeq)}
	}
	return Records(w, format, page, skuHeader, rows)
}

// NextPage tells on w (stderr) where the next page starts, when one follows.
func NextPage(w io.Writer, next *string) {
	if next != nil {
		fmt.Fprintf(w, "more rows follow: run again with --after %s\n", *next)
	}
}

// Fields prints one record of named values: with JSON, an object (keys in
// encoding/json's order); else a header and one row, an absent (nil)
// value as an empty cell.
func Fields(w io.Writer, format string, names []string, values []any) error {
	obj := make(map[string]any, len(names))
	row := make([]string, len(names))
	for i, name := range names {
		obj[name] = values[i]
		if v := reflect.ValueOf(values[i]); v.Kind() == reflect.Pointer {
			if !v.IsNil() {
				row[i] = fmt.Sprint(v.Elem().Interface())
			}
		} else if values[i] != nil {
			row[i] = fmt.Sprint(values[i])
		}
	}
	return Records(w, format, obj, names, [][]string{row})
}
