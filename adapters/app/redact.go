package app

import (
	"net/url"
	"regexp"
	"strings"
)

// dsnPassword finds the password of a key=value connection string.
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactURL returns a server URL fit for help texts and logs: a password,
// in URL or key=value form, shows as ***, as in postgres://user:***@host/db.
// Text that parses as neither is hidden whole, since it may be a secret.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	if !strings.Contains(raw, "://") {
		if strings.Contains(raw, "=") {
			return dsnPassword.ReplaceAllString(raw, "${1}***")
		}
		return "(hidden)"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(hidden: not a valid URL)"
	}
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	return strings.Replace(u.Redacted(), ":xxxxx@", ":***@", 1)
}
