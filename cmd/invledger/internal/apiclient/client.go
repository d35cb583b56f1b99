package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/invledger/invledger/adapters/httpapi"
	"github.com/invledger/invledger/domain"
)

// ErrNotConfigured means the API URL or the token is missing.
var ErrNotConfigured = errors.New("this command goes through the HTTP API as a token's principal: " +
	"set --api (INVLEDGER_API_URL) to the API's base URL and --token (INVLEDGER_API_TOKEN) to your bearer secret")

// Client calls one API as one principal.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the API at base, presenting token; either one
// empty is taken from INVLEDGER_API_URL or INVLEDGER_API_TOKEN. Both are
// required (ErrNotConfigured); base must be an http or https URL.
func New(base, token string) (*Client, error) {
	base, token = cmp.Or(base, os.Getenv("INVLEDGER_API_URL")), cmp.Or(token, os.Getenv("INVLEDGER_API_TOKEN"))
	if base == "" || token == "" {
		return nil, ErrNotConfigured
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, domain.NewFieldError("api", errors.New("must be an http:// or https:// URL such as http://127.0.0.1:8080"))
	}
	return &Client{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// Error is an error answer of the API. It matches (errors.Is) the domain
// sentinel of its code, so the CLI's exit status derives from it as from a
// local error.
type Error struct {
	Status int
	Code   string
	Detail string
	// Field is the input at fault, when the API names one.
	Field string
}

// Error reads as a local field error does: "field: detail".
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s (HTTP %d %s)", e.Field, e.Detail, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Detail, e.Status, e.Code)
}

// Is reports whether target is the domain sentinel of e's code.
func (e *Error) Is(target error) bool {
	c := domain.CodeOf(target)
	return c != domain.CodeInternal && c != domain.CodeOK && string(c) == e.Code
}

// Do sends method path (with its query) and body (JSON, when not nil) and
// decodes a 2xx answer into out (when not nil). Any other answer is an
// *Error; a server that cannot be reached is domain.ErrUnavailable.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", domain.ErrUnavailable, method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: %s %s: read the answer: %w", domain.ErrUnavailable, method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var eb struct {
			Error  string `json:"error"`
			Detail string `json:"detail"`
			Field  string `json:"field"`
		}
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			e.Code, e.Detail, e.Field = eb.Error, eb.Detail, eb.Field
		} else {
			e.Code, e.Detail = "http_error", strings.TrimSpace(string(raw))
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

// Adjustments reads one page of GET /v1/adjustments; empty filters and a
// zero after are left out.
func (c *Client) Adjustments(ctx context.Context, status, sku string, after int64, limit int) (httpapi.AdjustmentPageJSON, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for name, v := range map[string]string{"status": status, "sku": sku} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if after != 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var page httpapi.AdjustmentPageJSON
	err := c.Do(ctx, http.MethodGet, "/v1/adjustments?"+q.Encode(), nil, &page)
	return page, err
}
