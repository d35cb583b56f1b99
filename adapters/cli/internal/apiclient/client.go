package apiclient

import (
	"cmp"
	"errors"
	"net/http"
	"os"

	"github.com/invledger/invledger/adapters/client"
	"github.com/invledger/invledger/domain"
)

// ErrNotConfigured means the API URL or the token is missing.
var ErrNotConfigured = errors.New("this command goes through the HTTP API as a token's principal: " +
	"set --api (INVLEDGER_API_URL) to the API's base URL and --token (INVLEDGER_API_TOKEN) to your bearer secret")

// Refused reports whether err means the command may not act as a
// principal: no URL or token (ErrNotConfigured), or an API answer 401 (the
// token is unknown) or 403 (its role may not call this). A 403 of the
// ledger's own, self_approval, has its domain code and is not one of them.
func Refused(err error) bool {
	var ae *client.Error
	return errors.Is(err, ErrNotConfigured) ||
		errors.As(err, &ae) && domain.CodeOf(err) == domain.CodeInternal &&
			(ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden)
}

// New returns a client of the API at base, presenting token; either one
// empty is taken from INVLEDGER_API_URL or INVLEDGER_API_TOKEN. Both are
// required (ErrNotConfigured); base must be an http or https URL, named by
// its flag.
func New(base, token string) (*client.Client, error) {
	base, token = cmp.Or(base, os.Getenv("INVLEDGER_API_URL")), cmp.Or(token, os.Getenv("INVLEDGER_API_TOKEN"))
	if base == "" || token == "" {
		return nil, ErrNotConfigured
	}
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	if fe := (*domain.FieldError)(nil); errors.As(err, &fe) && fe.Field == "BaseURL" {
		// The user gave --api, not the client's BaseURL setting.
		return nil, domain.NewFieldError("api", fe.Err)
	}
	return c, err
}
