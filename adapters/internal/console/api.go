package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/domain"
)

// apiError is an API refusal the page shows to the user: its status and
// the API's own words.
type apiError struct {
	Status int
	Code   string `json:"error"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func (e *apiError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Detail
	}
	return e.Detail
}

// recorder is the in-process response of one API call.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

// call sends method path (with query q and a JSON body when in is not nil)
// to the API as s's principal, and decodes a 2xx answer into out. A 503
// is domain.ErrUnavailable; any other refusal an *apiError.
func (c *Console) call(ctx context.Context, s session, method, path string, q url.Values, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.Secret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	c.cfg.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	switch {
	case rec.status/100 == 2:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
		return nil
	case rec.status == http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s %s: %s", domain.ErrUnavailable, method, path, rec.body.String())
	default:
		e := &apiError{Status: rec.status}
		if err := json.Unmarshal(rec.body.Bytes(), e); err != nil || e.Code == "" {
			return fmt.Errorf("%s %s answered %d: %s", method, path, rec.status, rec.body.String())
		}
		return e
	}
}
