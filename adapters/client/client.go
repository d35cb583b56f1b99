// Package client is a Go client of the invledger HTTP API: a typed
// method per route, errors that match the domain's sentinel errors
// (errors.Is(err, domain.ErrSoldOut)), and retries of what is safe to
// retry. A call is retried on 503 (after its Retry-After, bounded) and on
// transport errors when it cannot write twice: reads, purchases and
// releases (their request_id is the idempotency key), and every other
// write, which the client sends with an Idempotency-Key it makes once per
// call. Purchases, reserves, orders and releases send their own key
// (request_id, order_id) as Idempotency-Key too: the API closes an idle
// keep-alive connection to admit another when it is full, and the header
// lets Go's transport send a request that met such a close again, on a
// fresh connection, at once. Every call ends by its context's deadline.
//
// Its request and answer bodies are those the server uses, from
// adapters/http/apiwire; of invledger it links only that and domain, none
// of the server (TestClientLinksOnlyWhatAClientNeeds).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API's, e.g. http://127.0.0.1:8080. Required.
	BaseURL string
	// Token is the bearer secret the calls present. Required.
	Token string
	// HTTPClient sends the requests. Default: one with a 30 s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of a retryable call. Default 4.
	MaxAttempts int
	// RetryWait is the wait before the first retry, doubled after each;
	// a 503's Retry-After replaces it, up to MaxRetryWait. Defaults 200ms
	// and 5s.
	RetryWait, MaxRetryWait time.Duration
}

func (c *Config) setDefaults() {
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 4
	}
	if c.RetryWait == 0 {
		c.RetryWait = 200 * time.Millisecond
	}
	if c.MaxRetryWait == 0 {
		c.MaxRetryWait = 5 * time.Second
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, domain.NewFieldError("BaseURL", errors.New("must be an http:// or https:// URL such as http://127.0.0.1:8080")))
	}
	if c.Token == "" {
		errs = append(errs, domain.NewFieldError("Token", errors.New("is required: a bearer secret of the API's tokens")))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, domain.NewFieldError("MaxAttempts", errors.New("must be at least 1")))
	}
	if c.RetryWait < 0 || c.MaxRetryWait < c.RetryWait {
		errs = append(errs, domain.NewFieldError("RetryWait", errors.New("must be positive and at most MaxRetryWait")))
	}
	return errors.Join(errs...)
}

// Client calls one API as one principal. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base string
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.BaseURL, "/")}, nil
}

// Error is an error answer of the API. It matches (errors.Is) the domain
// sentinel of its code, so callers test it as they would a local error.
type Error struct {
	Status int
	Code   string
	Detail string
	// Field is the input at fault, when the API names one.
	Field string
	// TraceID is the request's X-Request-Id, to find its lines in the
	// server's log.
	TraceID string
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

// call is one request: retry says it cannot write twice, key is its
// Idempotency-Key (none when empty).
type call struct {
	method, path string
	query        url.Values
	body         any
	key          string
	retry        bool
}

// answer is what a call got: its status and headers, for the methods
// that read them.
type answer struct {
	status int
	header http.Header
}

// Do sends method path (with its query) and body (JSON, when not nil) once
// and decodes a 2xx answer into out (when not nil): the way to a route
// this client has no method for. Any other answer is an *Error; a server
// that cannot be reached is domain.ErrUnavailable.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.do(ctx, call{method: method, path: path, body: body}, out)
	return err
}

func (c *Client) do(ctx context.Context, cl call, out any) (answer, error) {
	var payload []byte
	if cl.body != nil {
		var err error
		if payload, err = json.Marshal(cl.body); err != nil {
			return answer{}, err
		}
	}
	target := c.base + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	wait := c.cfg.RetryWait
	for attempt := 1; ; attempt++ {
		a, retryAfter, err := c.once(ctx, cl, target, payload, out)
		if err == nil || !cl.retry || attempt == c.cfg.MaxAttempts || !retryable(err) {
			return a, err
		}
		pause := min(max(wait, retryAfter), c.cfg.MaxRetryWait)
		select {
		case <-ctx.Done():
			return a, errors.Join(err, ctx.Err())
		case <-time.After(pause):
		}
		wait *= 2
	}
}

// once makes one attempt. retryAfter is a 503's Retry-After.
func (c *Client) once(ctx context.Context, cl call, target string, payload []byte, out any) (_ answer, retryAfter time.Duration, _ error) {
	req, err := http.NewRequestWithContext(ctx, cl.method, target, bytes.NewReader(payload))
	if err != nil {
		return answer{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if wire.ValidIdempotencyKey(cl.key) {
		// A request_id the header cannot carry goes in the body alone.
		req.Header.Set(wire.HeaderIdempotencyKey, cl.key)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return answer{}, 0, fmt.Errorf("%w: %s %s: %w", domain.ErrUnavailable, cl.method, cl.path, err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return a, 0, fmt.Errorf("%w: %s %s: read the answer: %w", domain.ErrUnavailable, cl.method, cl.path, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var body wire.ErrorJSON
		if json.Unmarshal(raw, &body) == nil && body.Error != "" {
			e.Code, e.Detail, e.Field, e.TraceID = body.Error, body.Detail, body.Field, body.TraceID
		} else {
			e.Code, e.Detail = "http_error", strings.TrimSpace(string(raw))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
		return a, retryAfter, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return a, 0, fmt.Errorf("%s %s: decode the answer: %w", cl.method, cl.path, err)
		}
	}
	return a, 0, nil
}

// retryable reports whether err may pass on its own: a 503 (unavailable,
// recovering, unsafe_redis) or a server that could not be reached.
func retryable(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status == http.StatusServiceUnavailable
	}
	return errors.Is(err, domain.ErrUnavailable)
}

// newKey makes the Idempotency-Key of a write that has no key of its own.
func newKey() string { return uuid.NewString() }
