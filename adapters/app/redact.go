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
		// user:password@host without a scheme is no key=value string.
		if strings.Contains(raw, "=") && !strings.Contains(raw, "@") {
			return dsnPassword.ReplaceAllString(raw, "${1}***")
		}
		return "(hidden)"
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(hidden: not a valid URL)"
	}
	// An @ anywhere but before the host ("//@://user:pw@h" parses with an
	// empty user and the password in the path) may carry a password.
	if strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment+u.Opaque, "@") {
		return "(hidden: not a valid URL)"
	}
	if _, has := u.User.Password(); !has {
		return u.String()
	}
	return strings.Replace(u.Redacted(), ":xxxxx@", ":***@", 1)
}

// RedactList renders comma-separated server entries, each either a bare
// host:port address, shown as is, or a URL, redacted as RedactURL does;
// anything else is hidden, since it may be a secret.
func RedactList(entries []string) string {
	out := make([]string, len(entries))
	for i, e := range entries {
		switch {
		case strings.Contains(e, "://"):
			out[i] = RedactURL(e)
		case strings.Contains(e, "@"):
			out[i] = "(hidden)"
		default:
			out[i] = e
		}
	}
	return strings.Join(out, ",")
}
