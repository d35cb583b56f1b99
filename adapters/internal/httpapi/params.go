package httpapi

import (
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/invledger/invledger/domain"
)

// pathParamCheck validates one path parameter of r, an error naming it.
type pathParamCheck func(r *http.Request) error

// pathParamChecks holds, by wildcard name, how every path parameter of the
// routes is validated. handle refuses a route with a wildcard missing here,
// so no parameter reaches a store unchecked (PostgreSQL refuses a value
// that is not UTF-8 with an error, which would answer 500).
var pathParamChecks = map[string]pathParamCheck{
	"sku": func(r *http.Request) error {
		_, err := domain.NewSKUID(r.PathValue("sku"))
		return err
	},
	"hold_id": func(r *http.Request) error {
		_, err := domain.NewHoldID(r.PathValue("hold_id"))
		return err
	},
	"order_id": func(r *http.Request) error {
		_, err := domain.NewOrderID(r.PathValue("order_id"))
		return err
	},
	"user_id": func(r *http.Request) error {
		_, err := domain.NewUserID(r.PathValue("user_id"))
		return err
	},
	"id": func(r *http.Request) error {
		_, err := pathID(r)
		return err
	},
	"webhook_id": func(r *http.Request) error {
		if !webhookIDPattern.MatchString(r.PathValue("webhook_id")) {
			return domain.NewFieldError("webhook_id", errors.New("must be a webhook id: wh_ and a lower-case UUID"))
		}
		return nil
	},
}

// webhookIDPattern is the shape of the ids ledger.Webhooks gives.
var webhookIDPattern = regexp.MustCompile(`^wh_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkPathParams wraps h so that every wildcard of path is validated
// before h runs; a bad one is 400 naming it.
func (s *server) checkPathParams(path string, h http.Handler) http.Handler {
	var names []string
	for rest := path; ; {
		_, after, ok := strings.Cut(rest, "{")
		if !ok {
			break
		}
		name, tail, _ := strings.Cut(after, "}")
		if pathParamChecks[name] == nil {
			panic("httpapi: path parameter {" + name + "} of " + path + " has no check") // a programming error
		}
		names, rest = append(names, name), tail
	}
	if len(names) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range names {
			if err := pathParamChecks[name](r); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
