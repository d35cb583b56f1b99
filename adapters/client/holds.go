package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/adapters/wire"
)

// Reserve holds qty units of sku for user for ttlSeconds (0: the server's
// default). requestID is the idempotency key: a retry returns the original
// hold, in its state now.
func (c *Client) Reserve(ctx context.Context, sku, user string, qty int64, requestID string, ttlSeconds int64) (wire.HoldJSON, error) {
	body := wire.ReserveBody{UserID: user, Qty: &qty, RequestID: requestID}
	if ttlSeconds != 0 {
		body.TTLSeconds = &ttlSeconds
	}
	var h wire.HoldJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: holdsPath(sku), retry: true, key: requestID, body: body}, &h)
	return h, err
}

// ConfirmHold makes the hold a sale; a repeat gives the same answer, so it
// is retried.
func (c *Client) ConfirmHold(ctx context.Context, sku, holdID string) (wire.HoldJSON, error) {
	return c.endHold(ctx, sku, holdID, "confirm")
}

// CancelHold gives the hold's units back; a repeat gives the same answer,
// so it is retried.
func (c *Client) CancelHold(ctx context.Context, sku, holdID string) (wire.HoldJSON, error) {
	return c.endHold(ctx, sku, holdID, "cancel")
}

func (c *Client) endHold(ctx context.Context, sku, holdID, action string) (wire.HoldJSON, error) {
	var h wire.HoldJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: holdsPath(sku) + "/" + url.PathEscape(holdID) + "/" + action, retry: true}, &h)
	return h, err
}

// Hold reads a hold's state.
func (c *Client) Hold(ctx context.Context, sku, holdID string) (h wire.HoldJSON, err error) {
	return h, c.get(ctx, holdsPath(sku)+"/"+url.PathEscape(holdID), nil, &h)
}

func holdsPath(sku string) string { return skuPath(sku) + "/holds" }
