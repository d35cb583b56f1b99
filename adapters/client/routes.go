package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/invledger/invledger/adapters/wire"
)

// Receipt is a purchase's answer: its body, and what its headers say.
// Replayed is true when it is the original answer of an earlier call with
// the same request id, and Released when its units were released since.
type Receipt struct {
	wire.ReceiptJSON
	Replayed, Released bool
}

// Deduct buys qty units of sku for user. requestID is the idempotency key:
// a retry with it, by this client or a later call, returns the original
// receipt and never buys twice.
func (c *Client) Deduct(ctx context.Context, sku, user string, qty int64, requestID string) (Receipt, error) {
	var rc Receipt
	a, err := c.do(ctx, call{method: http.MethodPost, path: skuPath(sku) + "/deduct", retry: true, key: requestID,
		body: wire.DeductBody{UserID: user, Qty: &qty, RequestID: requestID}}, &rc.ReceiptJSON)
	rc.Replayed, rc.Released = a.header.Get(wire.HeaderReplayed) == "true", a.header.Get(wire.HeaderReleased) == "true"
	return rc, err
}

// Release gives back the units of the purchase requestID made, once.
func (c *Client) Release(ctx context.Context, sku, user, requestID, reason string) (wire.ReleaseReceiptJSON, error) {
	var rr wire.ReleaseReceiptJSON
	_, err := c.do(ctx, call{method: http.MethodPost, path: skuPath(sku) + "/release", retry: true, key: requestID,
		body: wire.ReleaseBody{UserID: user, RequestID: requestID, Reason: reason}}, &rr)
	return rr, err
}

// CreateSKU defines sku; created is false when the same definition existed.
func (c *Client) CreateSKU(ctx context.Context, sku string, stock, perUserLimit int64) (def wire.SKUJSON, created bool, err error) {
	a, err := c.do(ctx, call{method: http.MethodPut, path: skuPath(sku), retry: true, key: newKey(),
		body: wire.CreateSKUBody{Stock: &stock, PerUserLimit: &perUserLimit}}, &def)
	return def, a.status == http.StatusCreated, err
}

// SKU returns both views of sku, Redis's and the ledger's.
func (c *Client) SKU(ctx context.Context, sku string) (v wire.SKUViewJSON, err error) {
	return v, c.get(ctx, skuPath(sku), nil, &v)
}

// SKUs returns one page of the defined SKUs after the SKU id after.
func (c *Client) SKUs(ctx context.Context, after string, limit int) (p wire.SKUPageJSON, err error) {
	return p, c.get(ctx, "/v1/skus", page(after, limit), &p)
}

// Warm loads sku into Redis; a no-op on a live SKU.
func (c *Client) Warm(ctx context.Context, sku string) (w wire.WarmJSON, err error) {
	return w, c.post(ctx, skuPath(sku)+"/warm", nil, &w)
}

// Close ends sku's sale.
func (c *Client) Close(ctx context.Context, sku string) (r wire.CloseJSON, err error) {
	return r, c.post(ctx, skuPath(sku)+"/close", nil, &r)
}

// Retire removes closed, archived sku from Redis, leaving a tombstone.
func (c *Client) Retire(ctx context.Context, sku string) (r wire.RetireJSON, err error) {
	return r, c.post(ctx, skuPath(sku)+"/retire", nil, &r)
}

// Events returns sku's ledger rows with seq above after.
func (c *Client) Events(ctx context.Context, sku string, after int64, limit int) (p wire.HistoryPageJSON, err error) {
	return p, c.get(ctx, skuPath(sku)+"/events", page(itoa(after), limit), &p)
}

// BalanceAt returns sku's stock at the instant at.
func (c *Client) BalanceAt(ctx context.Context, sku string, at time.Time) (s wire.StockAtJSON, err error) {
	return s, c.get(ctx, skuPath(sku)+"/balance", url.Values{"at": {at.UTC().Format(time.RFC3339Nano)}}, &s)
}

// Buyers returns who holds units of sku now, after the user id after.
func (c *Client) Buyers(ctx context.Context, sku, after string, limit int) (b wire.BuyersJSON, err error) {
	return b, c.get(ctx, skuPath(sku)+"/buyers", page(after, limit), &b)
}

// Operations returns who changed sku's state, after the operation id after.
func (c *Client) Operations(ctx context.Context, sku string, after int64, limit int) (p wire.OperationPageJSON, err error) {
	return p, c.get(ctx, skuPath(sku)+"/operations", page(itoa(after), limit), &p)
}

// Purchases returns user's purchases and releases across SKUs.
func (c *Client) Purchases(ctx context.Context, user, after string, limit int) (p wire.UserPageJSON, err error) {
	return p, c.get(ctx, "/v1/users/"+url.PathEscape(user)+"/purchases", page(after, limit), &p)
}

// Reconcile reconciles every SKU, or only sku when it is not empty, and
// repairs what it may when repair is set.
func (c *Client) Reconcile(ctx context.Context, sku string, repair bool) (r wire.ReconcileReportJSON, err error) {
	return r, c.post(ctx, "/v1/reconcile", wire.ReconcileBody{SKU: sku, Repair: repair}, &r)
}

// Reconciliations returns recorded runs, newest first, before run after.
func (c *Client) Reconciliations(ctx context.Context, after int64, limit int) (p wire.RunPageJSON, err error) {
	return p, c.get(ctx, "/v1/reconciliations", page(itoa(after), limit), &p)
}

// RequestAdjustment asks for a manual stock change of delta; another
// person approves it.
func (c *Client) RequestAdjustment(ctx context.Context, sku string, delta int64, reason string) (a wire.AdjustmentJSON, err error) {
	return a, c.post(ctx, "/v1/adjustments", wire.AdjustmentBody{SKU: sku, Delta: &delta, Reason: reason}, &a)
}

// Adjustments returns one page of adjustments, newest first; empty status
// and sku do not filter.
func (c *Client) Adjustments(ctx context.Context, status, sku string, after int64, limit int) (p wire.AdjustmentPageJSON, err error) {
	q := page(itoa(after), limit)
	for name, v := range map[string]string{"status": status, "sku": sku} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return p, c.get(ctx, "/v1/adjustments", q, &p)
}

// ApproveAdjustment approves and applies adjustment id.
func (c *Client) ApproveAdjustment(ctx context.Context, id int64) (a wire.AdjustmentJSON, err error) {
	return a, c.post(ctx, "/v1/adjustments/"+strconv.FormatInt(id, 10)+"/approve", nil, &a)
}

// RejectAdjustment rejects adjustment id.
func (c *Client) RejectAdjustment(ctx context.Context, id int64) (a wire.AdjustmentJSON, err error) {
	return a, c.post(ctx, "/v1/adjustments/"+strconv.FormatInt(id, 10)+"/reject", nil, &a)
}

// DeadLetters returns one page of dead letters; an empty status does not filter.
func (c *Client) DeadLetters(ctx context.Context, status string, after int64, limit int) (p wire.DeadLetterPageJSON, err error) {
	q := page(itoa(after), limit)
	if status != "" {
		q.Set("status", status)
	}
	return p, c.get(ctx, "/v1/dead-letters", q, &p)
}

// ReplayDeadLetter projects dead letter id again.
func (c *Client) ReplayDeadLetter(ctx context.Context, id int64) (d wire.DeadLetterJSON, err error) {
	return d, c.post(ctx, "/v1/dead-letters/"+strconv.FormatInt(id, 10)+"/replay", nil, &d)
}

// ResolveDeadLetter marks dead letter id handled by hand, saying why.
func (c *Client) ResolveDeadLetter(ctx context.Context, id int64, note string) (d wire.DeadLetterJSON, err error) {
	return d, c.post(ctx, "/v1/dead-letters/"+strconv.FormatInt(id, 10)+"/resolve", wire.ResolveBody{Note: note}, &d)
}

// get reads path; reads are always safe to retry.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: path, query: q, retry: true}, out)
	return err
}

// post writes through path with a fresh Idempotency-Key, which the API
// keeps for the writes that have no key of their own and which makes the
// retries of every other write safe: warm, close and retire are no-ops
// when repeated, and decisions answer the stored outcome.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: path, body: body, retry: true, key: newKey()}, out)
	return err
}

// page is the query of a paged list; zero values are left out.
func page(after string, limit int) url.Values {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

func itoa(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// CreateWebhook subscribes url to the business events of types (see
// domain.WebhookEventTypes). The answer holds the secret that signs the
// deliveries, which no later read shows.
func (c *Client) CreateWebhook(ctx context.Context, url string, types []string) (w wire.WebhookJSON, err error) {
	return w, c.post(ctx, "/v1/webhooks", wire.WebhookBody{URL: url, EventTypes: types}, &w)
}

// Webhooks lists the subscriptions, without their secrets.
func (c *Client) Webhooks(ctx context.Context) (l wire.WebhookListJSON, err error) {
	return l, c.get(ctx, "/v1/webhooks", nil, &l)
}

// DeleteWebhook ends subscription id. A retry after a lost answer may
// find it gone: that is domain.ErrNotFound.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: "/v1/webhooks/" + url.PathEscape(id), retry: true}, nil)
	return err
}

// RotateWebhook gives subscription id a new secret and returns it; the
// old one keeps signing deliveries until PreviousSecretExpiresAt.
func (c *Client) RotateWebhook(ctx context.Context, id string) (w wire.WebhookJSON, err error) {
	return w, c.post(ctx, "/v1/webhooks/"+url.PathEscape(id)+"/rotate", nil, &w)
}

func skuPath(sku string) string { return "/v1/skus/" + url.PathEscape(sku) }
