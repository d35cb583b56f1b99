package httpclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/adapters/http/httpapi"
	"github.com/invledger/invledger/ledger"
)

// PlaceOrder reserves every line of an order for user, or none; a refused
// line is an *Error whose Field names it ("lines[2]"). The order id is the
// idempotency key, so the call is retried. ttlSeconds 0 is the server's
// default.
func (c *Client) PlaceOrder(ctx context.Context, orderID, user string, ttlSeconds int64, lines []ledger.OrderLineInput) (httpapi.OrderJSON, error) {
	body := map[string]any{"order_id": orderID, "user_id": user, "lines": lines}
	if ttlSeconds != 0 {
		body["ttl_seconds"] = ttlSeconds
	}
	var o httpapi.OrderJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/orders", retry: true, body: body}, &o)
	return o, err
}

// ConfirmOrder confirms every line of the order, or fails naming the line
// that could not be, with the others undone; a repeat gives the same
// answer, so it is retried.
func (c *Client) ConfirmOrder(ctx context.Context, orderID string) (httpapi.OrderJSON, error) {
	return c.endOrder(ctx, orderID, "confirm")
}

// CancelOrder cancels every line still held; a repeat gives the same
// answer, so it is retried.
func (c *Client) CancelOrder(ctx context.Context, orderID string) (httpapi.OrderJSON, error) {
	return c.endOrder(ctx, orderID, "cancel")
}

func (c *Client) endOrder(ctx context.Context, orderID, action string) (httpapi.OrderJSON, error) {
	var o httpapi.OrderJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: orderPath(orderID) + "/" + action, retry: true}, &o)
	return o, err
}

// Order reads an order's state, derived from its lines' holds.
func (c *Client) Order(ctx context.Context, orderID string) (o httpapi.OrderJSON, err error) {
	return o, c.get(ctx, orderPath(orderID), nil, &o)
}

func orderPath(orderID string) string { return "/v1/orders/" + url.PathEscape(orderID) }
