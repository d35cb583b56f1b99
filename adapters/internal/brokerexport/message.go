package brokerexport

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/invledger/invledger/adapters/internal/eventjson"
	"github.com/invledger/invledger/domain"
)

// Headers every published message carries besides the broker's own
// de-duplication id (JetStream's Nats-Msg-Id, AMQP's message-id), which
// is the event id.
const (
	HeaderSKU = "Invledger-Sku"
	HeaderSeq = "Invledger-Seq"
	// HeaderSchema is the version of the body's shape, the API's event
	// JSON (wire.EventJSON), which changes only as a versioned change.
	HeaderSchema = "Invledger-Schema"
	// Schema is HeaderSchema's value.
	Schema = "v1"
)

// DefaultPrefix is the default prefix of subjects and routing keys.
const DefaultPrefix = "invledger.events"

// Message is one ledger event as it is published: Body is the API's event
// JSON (wire.EventJSON), the object the business-event webhooks carry as
// their data and the tail feed prints.
type Message struct {
	EventID string
	SKU     string
	Seq     int64
	Body    []byte
}

// NewMessage returns e as a message.
func NewMessage(e domain.Event) Message {
	body, _ := json.Marshal(eventjson.New(e)) // strings, numbers and times always encode
	return Message{EventID: e.ID, SKU: e.SKU, Seq: e.Seq, Body: body}
}

// SeqHeader renders a seq as HeaderSeq carries it.
func SeqHeader(seq int64) string { return strconv.FormatInt(seq, 10) }

// Token encodes a SKU id into one subject or routing-key token: letters,
// digits, '-' and '_' stay, and every other byte (the '.' and ':' a SKU id
// may hold, on which NATS and AMQP topic routing split) becomes '~'
// followed by its two upper-case hex digits, so "phone.x:1" is
// "phone~2Ex~3A1". '~' itself is escaped too (a SKU id never holds it), so
// the encoding is reversible (ParseToken), and no token is empty.
func Token(sku string) string {
	var b strings.Builder
	for i := 0; i < len(sku); i++ {
		c := sku[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('~')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// ParseToken is Token's inverse; ok is false for text Token never returns.
func ParseToken(tok string) (sku string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '~' {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(tok) {
			return "", false
		}
		v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil || strings.ToUpper(tok[i+1:i+3]) != tok[i+1:i+3] || Token(string([]byte{byte(v)})) != tok[i:i+3] {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	if tok == "" {
		return "", false
	}
	return b.String(), true
}

// CheckPrefix reports whether prefix is usable before a token: dot-separated
// non-empty tokens of letters, digits, '-', '_' and '~'; its error names
// the setting.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return errPrefix(prefix)
	}
	for _, tok := range strings.Split(prefix, ".") {
		if tok == "" {
			return errPrefix(prefix)
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '~') {
				return errPrefix(prefix)
			}
		}
	}
	return nil
}

func errPrefix(prefix string) error {
	return &SettingError{Setting: SettingPrefix, Err: errString("must be dot-separated tokens of letters, digits, '-', '_' or '~', got " + strconv.Quote(prefix))}
}

type errString string

func (e errString) Error() string { return string(e) }
