package brokerexport

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The settings the export's errors name, flag and variable, so an
// operator reading a refusal knows what to fix.
const (
	SettingNATSURL          = "--export-nats-url (INVLEDGER_EXPORT_NATS_URL)"
	SettingNATSStream       = "--export-nats-stream (INVLEDGER_EXPORT_NATS_STREAM)"
	SettingNATSCreateStream = "--export-nats-create-stream (INVLEDGER_EXPORT_NATS_CREATE_STREAM)"
	SettingNATSDuplicates   = "--export-nats-duplicate-window (INVLEDGER_EXPORT_NATS_DUPLICATE_WINDOW)"
	SettingAMQPURL          = "--export-amqp-url (INVLEDGER_EXPORT_AMQP_URL)"
	SettingAMQPExchange     = "--export-amqp-exchange (INVLEDGER_EXPORT_AMQP_EXCHANGE)"
	SettingPrefix           = "--export-prefix (INVLEDGER_EXPORT_PREFIX)"
)

// SettingError is a refusal that a setting explains: a broker that
// refuses the credentials of its URL, a stream that is missing, an
// exchange no queue is bound to.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return fmt.Sprintf("%s: %v", e.Setting, e.Err) }

func (e *SettingError) Unwrap() error { return e.Err }

// RedactedError returns err with the password of rawURL, wherever its
// text shows it, as ***: client libraries quote the URL they could not use.
func RedactedError(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	u, perr := url.Parse(rawURL)
	if perr != nil {
		// The text may hold the password anywhere: keep none of it.
		return errors.New("the URL does not parse")
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "***"))
}
