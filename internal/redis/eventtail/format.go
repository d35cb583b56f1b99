package eventtail

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/invledger/invledger/domain"
)

// Formats Printer accepts.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// EventJSON is an event as a tail prints it with --format json, one object
// a line. Empty strings stand for absent fields.
type EventJSON struct {
	EventID      string    `json:"event_id"`
	SKU          string    `json:"sku"`
	Seq          int64     `json:"seq"`
	Type         string    `json:"type"`
	Delta        int64     `json:"delta"`
	Qty          int64     `json:"qty"`
	BalanceAfter int64     `json:"balance_after"`
	UserID       string    `json:"user_id"`
	RequestID    string    `json:"request_id"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason"`
	OccurredAt   time.Time `json:"occurred_at"`
}

// NewEventJSON maps e into its JSON shape, field by field.
func NewEventJSON(e domain.Event) EventJSON {
	return EventJSON{EventID: e.ID, SKU: e.SKU, Seq: e.Seq, Type: string(e.Type), Delta: e.Delta, Qty: e.Qty,
		BalanceAfter: e.Balance, UserID: e.User, RequestID: e.RequestID, Actor: e.Actor, Reason: e.Reason,
		OccurredAt: e.OccurredAt}
}

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
// for FormatJSON, as one EventJSON object a line.
func Printer(w io.Writer, format string) func(domain.Event) error {
	if format == FormatJSON {
		enc := json.NewEncoder(w)
		return func(e domain.Event) error { return enc.Encode(NewEventJSON(e)) }
	}
	return func(e domain.Event) error {
		_, err := fmt.Fprintln(w, Line(e))
		return err
	}
}
