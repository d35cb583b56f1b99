package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/invledger/invledger/adapters/wire"
)

// PlaceOrder reserves every line of an order for user, or none; a refused
// line is an *Error whose Field names it ("lines[2]"). The order id is the
// idempotency key, so the call is retried. ttlSeconds 0 is the server's
// default.
func (c *Client) PlaceOrder(ctx context.Context, orderID, user string, ttlSeconds int64, lines []wire.OrderLineBody) (wire.OrderJSON, error) {
	body := wire.PlaceOrderBody{OrderID: orderID, UserID: user, Lines: lines}
	if ttlSeconds != 0 {
		body.TTLSeconds = &ttlSeconds
	}
	var o wire.OrderJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/orders", retry: true, key: orderID, body: body}, &o)
	return o, err
}

// ConfirmOrder confirms every line of the order, or fails naming the line
// that could not be, with the others undone; a repeat gives the same
// answer, so it is retried.
func (c *Client) ConfirmOrder(ctx context.Context, orderID string) (wire.OrderJSON, error) {
	return c.endOrder(ctx, orderID, "confirm")
}

// CancelOrder cancels every line still held; a repeat gives the same
// answer, so it is retried.
func (c *Client) CancelOrder(ctx context.Context, orderID string) (wire.OrderJSON, error) {
	return c.endOrder(ctx, orderID, "cancel")
}

func (c *Client) endOrder(ctx context.Context, orderID, action string) (wire.OrderJSON, error) {
	var o wire.OrderJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: orderPath(orderID) + "/" + action, retry: true}, &o)
	return o, err
}

// Order reads an order's state, derived from its lines' holds.
func (c *Client) Order(ctx context.Context, orderID string) (o wire.OrderJSON, err error) {
	return o, c.get(ctx, orderPath(orderID), nil, &o)
}

func orderPath(orderID string) string { return "/v1/orders/" + url.PathEscape(orderID) }
