package eventtail

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/invledger/invledger/adapters/internal/eventjson"
	"github.com/invledger/invledger/domain"
)

// Formats Printer accepts.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Line is e as one line of text: time, type, seq, units, balance after,
// then who and why when the event says.
func Line(e domain.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s seq=%d delta=%+d balance=%d", e.OccurredAt.UTC().Format(time.RFC3339Nano), e.SKU, e.Type, e.Seq, e.Delta, e.Balance)
	for _, kv := range [][2]string{{"user", e.User}, {"request", e.RequestID}, {"actor", e.Actor}, {"reason", e.Reason}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%q", kv[0], kv[1])
		}
	}
	fmt.Fprintf(&b, " event=%s", e.ID)
	return b.String()
}

// CheckFormat refuses a format Printer does not know, naming the flag.
func CheckFormat(format string) error {
	if format != FormatText && format != FormatJSON {
		return fmt.Errorf("--format must be %s or %s, got %q", FormatText, FormatJSON, format)
	}
	return nil
}

// Printer returns a Follow callback writing each event to w as a Line or,
// for FormatJSON, as the API's event JSON (wire.EventJSON), one object a line.
func Printer(w io.Writer, format string) func(domain.Event) error {
	if format == FormatJSON {
		enc := json.NewEncoder(w)
		return func(e domain.Event) error { return enc.Encode(eventjson.New(e)) }
	}
	return func(e domain.Event) error {
		_, err := fmt.Fprintln(w, Line(e))
		return err
	}
}
