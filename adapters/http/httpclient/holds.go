package httpclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/adapters/http/httpapi"
)

// Reserve holds qty units of sku for user for ttlSeconds (0: the server's
// default). requestID is the idempotency key: a retry returns the original
// hold, in its state now.
func (c *Client) Reserve(ctx context.Context, sku, user string, qty int64, requestID string, ttlSeconds int64) (httpapi.HoldJSON, error) {
	body := map[string]any{"user_id": user, "qty": qty, "request_id": requestID}
	if ttlSeconds != 0 {
		body["ttl_seconds"] = ttlSeconds
	}
	var h httpapi.HoldJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: holdsPath(sku), retry: true, body: body}, &h)
	return h, err
}

// ConfirmHold makes the hold a sale; a repeat gives the same answer, so it
// is retried.
func (c *Client) ConfirmHold(ctx context.Context, sku, holdID string) (httpapi.HoldJSON, error) {
	return c.endHold(ctx, sku, holdID, "confirm")
}

// CancelHold gives the hold's units back; a repeat gives the same answer,
// so it is retried.
func (c *Client) CancelHold(ctx context.Context, sku, holdID string) (httpapi.HoldJSON, error) {
	return c.endHold(ctx, sku, holdID, "cancel")
}

func (c *Client) endHold(ctx context.Context, sku, holdID, action string) (httpapi.HoldJSON, error) {
	var h httpapi.HoldJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: holdsPath(sku) + "/" + url.PathEscape(holdID) + "/" + action, retry: true}, &h)
	return h, err
}

// Hold reads a hold's state.
func (c *Client) Hold(ctx context.Context, sku, holdID string) (h httpapi.HoldJSON, err error) {
	return h, c.get(ctx, holdsPath(sku)+"/"+url.PathEscape(holdID), nil, &h)
}

func holdsPath(sku string) string { return "/v1/skus/" + url.PathEscape(sku) + "/holds" }
