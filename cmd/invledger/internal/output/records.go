package output

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/domain"
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

// Adjustments prints a page of adjustments as a table on w, and where the
// next page starts on more.
func Adjustments(w, more io.Writer, page httpapi.AdjustmentPageJSON) error {
	rows := make([][]string, len(page.Adjustments))
	for i, a := range page.Adjustments {
		decided := ""
		if a.DecidedBy != nil {
			decided = *a.DecidedBy
		}
		rows[i] = []string{strconv.FormatInt(a.ID, 10), a.SKU, strconv.FormatInt(a.Delta, 10), a.Status, a.RequestedBy, decided, a.Reason}
	}
	if err := Records(w, Table, page, []string{"id", "sku", "delta", "status", "requested_by", "decided_by", "reason"}, rows); err != nil {
		return err
	}
	if page.NextAfter != nil {
		fmt.Fprintf(more, "more: run again with --after %d\n", *page.NextAfter)
	}
	return nil
}
