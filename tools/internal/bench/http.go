package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// httpTarget sells through a running `invledger serve`.
type httpTarget struct {
	base      string
	gateway   []string // Authorization header values
	operator  []string
	client    *http.Client
	sku       string
	deductURL string
	fast      *fastHTTP // purchases over plain http; nil for https
}

func newHTTPTarget(base, gatewayToken, operatorToken string, clients int, timeout time.Duration) *httpTarget {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        clients + 16,
		MaxIdleConnsPerHost: clients + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &httpTarget{
		base:     strings.TrimRight(base, "/"),
		gateway:  []string{"Bearer " + gatewayToken},
		operator: []string{"Bearer " + operatorToken},
		client:   &http.Client{Transport: tr, Timeout: timeout},
	}
}

func (t *httpTarget) name() string { return "http" }

// call sends an operator request and decodes a JSON answer into dst.
func (t *httpTarget) call(ctx context.Context, auth []string, method, path, body string, dst any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header["Authorization"] = auth
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w (is `invledger serve` running at --url %s?)", method, path, err, t.base)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return resp.StatusCode, fmt.Errorf("%s %s: 401: the token was refused; check --token/--operator-token against the serve's INVLEDGER_TOKENS", method, path)
	case http.StatusForbidden:
		return resp.StatusCode, fmt.Errorf("%s %s: 403: %s (--token needs role gateway, --operator-token role operator)", method, path, bytes.TrimSpace(b))
	}
	if dst != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, dst); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

func (t *httpTarget) prepare(ctx context.Context, sku string, stock int64) error {
	t.sku = sku
	t.deductURL = t.base + "/v1/skus/" + url.PathEscape(sku) + "/deduct"
	if u, err := url.Parse(t.deductURL); err == nil && u.Scheme == "http" {
		t.fast = newFastHTTP(u.Host, u.EscapedPath(), t.gateway[0])
	}
	// Check both tokens before anything is written: reading an unknown SKU
	// is 404 for an operator, and a deduct body the API refuses before it
	// touches anything is 400 for a gateway.
	if code, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+sku, "", nil); code != http.StatusNotFound {
		return fmt.Errorf("checking --operator-token: %w", err)
	}
	if code, err := t.call(ctx, t.gateway, http.MethodPost, "/v1/skus/"+sku+"/deduct", `{}`, nil); code != http.StatusBadRequest {
		return fmt.Errorf("checking --token: %w", err)
	}
	if _, err := t.call(ctx, t.operator, http.MethodPut, "/v1/skus/"+sku, fmt.Sprintf(`{"stock":%d,"per_user_limit":1}`, stock), nil); err != nil {
		return err
	}
	_, err := t.call(ctx, t.operator, http.MethodPost, "/v1/skus/"+sku+"/warm", "", nil)
	return err
}

func (t *httpTarget) deduct(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error) {
	body := append(w.scratch[:0], `{"user_id":"`...)
	body = append(body, user...)
	body = append(body, `","qty":1,"request_id":"`...)
	body = append(body, requestID...)
	body = append(body, `"}`...)
	w.scratch = body
	if t.fast != nil {
		status, resp, err := t.fast.post(ctx, w, body)
		if err != nil {
			return httpErrorOutcome(err), 0, err
		}
		return deductOutcome(status, resp)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.deductURL, bytes.NewReader(body))
	if err != nil {
		return outError, 0, err
	}
	req.Header["Authorization"] = t.gateway
	req.Header["Content-Type"] = contentTypeJSONHeader
	resp, err := t.client.Do(req)
	if err != nil {
		return httpErrorOutcome(err), 0, err
	}
	var buf [512]byte
	n, _ := io.ReadFull(resp.Body, buf[:])
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return deductOutcome(resp.StatusCode, buf[:n])
}

func httpErrorOutcome(err error) outcome {
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return outTimeout
	}
	return outError
}

// metrics reads the serve's /metrics, in Prometheus's text format.
func (t *httpTarget) metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %d %w", resp.StatusCode, err)
	}
	return string(body), nil
}

// batches reads invledger_purchase_batch_size from the serve's /metrics.
// A serve that does not export it reports none.
func (t *httpTarget) batches(ctx context.Context) (calls, attempts float64, err error) {
	body, err := t.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		switch name {
		case "invledger_purchase_batch_size_count":
			calls, _ = strconv.ParseFloat(value, 64)
		case "invledger_purchase_batch_size_sum":
			attempts, _ = strconv.ParseFloat(value, 64)
		}
	}
	return calls, attempts, nil
}

// callsInFlight sums invledger_purchase_batches_in_flight over its series
// in the serve's /metrics; ok is false where the serve does not export it.
func (t *httpTarget) callsInFlight(ctx context.Context) (calls float64, ok bool, err error) {
	body, err := t.metrics(ctx)
	if err != nil {
		return 0, false, err
	}
	const name = "invledger_purchase_batches_in_flight"
	for _, line := range strings.Split(body, "\n") {
		rest, found := strings.CutPrefix(line, name)
		if !found || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			return 0, false, fmt.Errorf("GET /metrics: %s: %w", line, err)
		}
		calls, ok = calls+v, true
	}
	return calls, ok, nil
}

// deductOutcome reads a deduct answer: 200 with the receipt's seq, or the
// contract's error codes.
func deductOutcome(status int, b []byte) (outcome, int64, error) {
	switch status {
	case http.StatusOK:
		seq, ok := jsonInt(b, `"seq":`)
		if !ok {
			return outError, 0, fmt.Errorf("200 without a seq: %s", b)
		}
		return outOK, seq, nil
	case http.StatusConflict, http.StatusServiceUnavailable, http.StatusBadRequest:
		switch o := codeOutcome(jsonString(b, `"error":"`)); {
		case o == outSoldOut || o == outAlready:
			return o, 0, nil
		case o != outError:
			return o, 0, fmt.Errorf("%d %s", status, b)
		}
	}
	return outError, 0, fmt.Errorf("%d %s", status, b)
}

var contentTypeJSONHeader = []string{"application/json"}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// jsonInt reads the integer after key in a flat JSON object.
func jsonInt(b []byte, key string) (int64, bool) {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && (b[j] == '-' || b[j] >= '0' && b[j] <= '9') {
		j++
	}
	n, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return n, err == nil
}

// jsonString reads the string after key (which ends with the opening quote).
func jsonString(b []byte, key string) string {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	b = b[i+len(key):]
	if j := bytes.IndexByte(b, '"'); j >= 0 {
		return string(b[:j])
	}
	return ""
}

type httpSKUView struct {
	RedisStock  *int64 `json:"redis_stock"`
	RedisSeq    *int64 `json:"redis_seq"`
	LedgerStock *int64 `json:"ledger_stock"`
	LedgerSeq   *int64 `json:"ledger_seq"`
}

func (t *httpTarget) view(ctx context.Context) (httpSKUView, error) {
	var v httpSKUView
	_, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+t.sku, "", &v)
	if err == nil && v.RedisStock == nil {
		err = fmt.Errorf("sku %s is no longer in Redis", t.sku)
	}
	return v, err
}

func (t *httpTarget) catchUp(ctx context.Context, timeout time.Duration) (bool, bool, time.Duration, error) {
	start := time.Now()
	for {
		v, err := t.view(ctx)
		if err != nil {
			return true, false, time.Since(start), err
		}
		if v.LedgerStock != nil && v.LedgerSeq != nil && *v.LedgerStock == *v.RedisStock && *v.LedgerSeq == *v.RedisSeq {
			return true, true, time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return true, false, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return true, false, time.Since(start), ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (t *httpTarget) check(ctx context.Context) (int64, int64, error) {
	var v struct {
		httpSKUView
		InitialStock int64 `json:"initial_stock"`
	}
	if _, err := t.call(ctx, t.operator, http.MethodGet, "/v1/skus/"+t.sku, "", &v); err != nil {
		return 0, 0, err
	}
	if v.RedisStock == nil {
		return 0, 0, fmt.Errorf("sku %s is no longer in Redis", t.sku)
	}
	return v.InitialStock - *v.RedisStock, *v.RedisStock, nil
}

func (t *httpTarget) close() { t.client.CloseIdleConnections() }
