package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/invledger/invledger/adapters/internal/httpapi"
	"github.com/invledger/invledger/adapters/wire"
)

// signInPage shows the token form; a user already signed in goes on.
func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if _, err := c.readSession(r); err == nil {
		http.Redirect(w, r, Prefix+"sales", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", session{}, signInView{Next: safeNext(r.URL.Query().Get("next"))})
}

type signInView struct {
	Next, Problem string
}

// safeNext keeps a sign-in's return path inside the console: a path
// (no scheme or host) under Prefix, without "..", or else the Sales page.
func safeNext(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(p, Prefix) ||
		strings.HasPrefix(p, "//") || strings.Contains(p, "..") || strings.ContainsAny(p, "\\\r\n") {
		return Prefix + "sales"
	}
	return p
}

// signIn checks the pasted token as the API does and starts a session.
// Gateway tokens may not sign in: the console offers nothing a storefront
// needs, and a leaked console session must not be able to buy. The form
// has no session yet, so cross-site posts are refused by origin
// (CrossOriginProtection) instead of a CSRF token.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	next := safeNext(r.PostFormValue("next"))
	client := clientAddr(r)
	// A client that keeps guessing is answered without its token being
	// looked at, so guessing costs it time.
	if wait := c.throttle.wait(client); wait > 0 {
		c.cfg.SignInFailed(SignInThrottled)
		secs := strconv.Itoa(int((wait + time.Second - 1) / time.Second))
		w.Header().Set("Retry-After", secs)
		c.render(w, r, http.StatusTooManyRequests, "signin", session{}, signInView{Next: next,
			Problem: "Too many wrong tokens from your address: try again in " + secs + " s."})
		return
	}
	p, ok := c.cfg.Tokens.Lookup(strings.TrimSpace(r.PostFormValue("token")))
	switch {
	case !ok:
		n := c.throttle.failed(client)
		c.cfg.SignInFailed(SignInBadToken)
		c.cfg.Logger.WarnContext(r.Context(), "console sign-in failed: the token is not valid", "client", client, "failures", n)
		c.render(w, r, http.StatusUnauthorized, "signin", session{}, signInView{Next: next, Problem: "That token is not valid."})
		return
	case p.Role == httpapi.RoleGateway:
		c.cfg.SignInFailed(SignInGatewayToken)
		c.cfg.Logger.WarnContext(r.Context(), "console sign-in refused: a gateway token", "client", client, "name", p.Name)
		c.render(w, r, http.StatusForbidden, "signin", session{}, signInView{Next: next,
			Problem: "Gateway tokens may not sign in to the console: use an auditor, operator or approver token."})
		return
	}
	c.throttle.succeeded(client)
	s := session{ID: randomToken(), Name: p.Name, Role: p.Role, Secret: strings.TrimSpace(r.PostFormValue("token")),
		CSRF: randomToken(), Started: time.Now().Unix()}
	if err := c.cfg.Sessions.Start(r.Context(), s.ID, s.Name, string(s.Role), time.Now().Add(-c.cfg.MaxAge)); err != nil {
		c.fail(w, r, session{}, err)
		return
	}
	if err := c.writeSession(w, r, s); err != nil {
		c.fail(w, r, session{}, err)
		return
	}
	httpapi.SetPrincipal(w, s.Name)
	c.cfg.Logger.InfoContext(r.Context(), "console sign-in", "name", s.Name, "role", s.Role, "client", client)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut ends the session everywhere: the store refuses its cookie from
// now on, in every process.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s session) {
	if err := c.cfg.Sessions.End(r.Context(), s.ID); err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.clearSession(w, r)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// salesPageSize is the rows of one Sales page.
const salesPageSize = 25

// maxSalesSKUs bounds the SKUs the Sales page sorts and filters in memory.
const maxSalesSKUs = 10_000

type salesRow struct {
	wire.SKUItemJSON
	Sold, Buyers int64
	// Held is the units of the SKU's open holds, in Redis.
	Held          *int64
	MoreBuyers    bool
	LastActivity  *time.Time
	DetailMissing bool
}

type salesView struct {
	Rows                    []salesRow
	Q, State, Sort, Dir     string
	Page, Pages, Total      int
	States                  []string
	Truncated               bool
	SortColumns             []sortColumn
	PrevPage, NextPage      int
	HasPrev, HasNext        bool
	FirstShown, LastShown   int
	FilteredOut, TotalShown int
}

type sortColumn struct{ Key, Label string }

var salesSorts = []sortColumn{{"sku", "SKU"}, {"state", "State"}, {"redis_stock", "Stock (Redis)"}, {"ledger_stock", "Stock (ledger)"}, {"initial", "Initial stock"}}

func cmpOpt(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}

// sales lists every SKU with its figures, filtered by text and state,
// sorted by a column, and paged. The list is read whole (up to
// maxSalesSKUs) so sorting spans every SKU; held, sold, buyers and last
// activity cost a query each and are read for the rows shown only.
func (c *Console) sales(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	v := salesView{Q: q.Get("q"), State: q.Get("state"), Sort: q.Get("sort"), Dir: q.Get("dir"), SortColumns: salesSorts,
		States: []string{"not_warmed", "open", "closed", "recovering", "retired"}}
	if !slices.ContainsFunc(salesSorts, func(sc sortColumn) bool { return sc.Key == v.Sort }) {
		v.Sort = "sku"
	}
	if v.Dir != "desc" {
		v.Dir = "asc"
	}
	all, truncated, err := c.allSKUs(r.Context(), s)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v.Truncated = truncated
	v.Total = len(all)
	all = slices.DeleteFunc(all, func(it wire.SKUItemJSON) bool {
		return (v.Q != "" && !strings.Contains(strings.ToLower(it.SKU), strings.ToLower(v.Q))) || (v.State != "" && it.State != v.State)
	})
	slices.SortStableFunc(all, func(a, b wire.SKUItemJSON) int {
		var d int
		switch v.Sort {
		case "state":
			d = cmp.Compare(a.State, b.State)
		case "redis_stock":
			d = cmpOpt(a.RedisStock, b.RedisStock)
		case "ledger_stock":
			d = cmpOpt(a.LedgerStock, b.LedgerStock)
		case "initial":
			d = cmp.Compare(a.InitialStock, b.InitialStock)
		}
		if d == 0 {
			d = cmp.Compare(a.SKU, b.SKU)
		}
		if v.Dir == "desc" {
			d = -d
		}
		return d
	})
	v.TotalShown = len(all)
	v.Pages = max(1, (len(all)+salesPageSize-1)/salesPageSize)
	v.Page, _ = strconv.Atoi(q.Get("page"))
	v.Page = min(max(v.Page, 1), v.Pages)
	lo := (v.Page - 1) * salesPageSize
	hi := min(lo+salesPageSize, len(all))
	v.HasPrev, v.HasNext, v.PrevPage, v.NextPage = v.Page > 1, v.Page < v.Pages, v.Page-1, v.Page+1
	v.FirstShown, v.LastShown = lo+1, hi
	for _, it := range all[lo:hi] {
		row := salesRow{SKUItemJSON: it}
		if err := c.fillActivity(r, s, &row); err != nil {
			if !errors.As(err, new(*apiError)) {
				c.fail(w, r, s, err)
				return
			}
			row.DetailMissing = true
		}
		v.Rows = append(v.Rows, row)
	}
	c.render(w, r, http.StatusOK, "sales", s, v)
}

// fillActivity reads a row's held units, buyers (the first 1000) and last
// ledger event.
func (c *Console) fillActivity(r *http.Request, s session, row *salesRow) error {
	var view wire.SKUViewJSON
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+url.PathEscape(row.SKU), nil, nil, &view); err != nil {
		return err
	}
	row.Held = view.RedisHeld
	var b wire.BuyersJSON
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+url.PathEscape(row.SKU)+"/buyers", url.Values{"limit": {"1000"}}, nil, &b); err != nil {
		return err
	}
	for _, h := range b.Buyers {
		row.Sold += h.Qty
	}
	row.Buyers, row.MoreBuyers = int64(len(b.Buyers)), b.NextAfter != nil
	if row.LedgerSeq == nil || *row.LedgerSeq < 1 {
		return nil
	}
	var h wire.HistoryPageJSON
	err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+url.PathEscape(row.SKU)+"/events",
		url.Values{"after": {strconv.FormatInt(*row.LedgerSeq-1, 10)}, "limit": {"1"}}, nil, &h)
	if err == nil && len(h.Events) > 0 {
		row.LastActivity = &h.Events[0].OccurredAt
	}
	return err
}

// allSKUs reads the SKU list page by page, up to maxSalesSKUs; truncated
// says there were more.
func (c *Console) allSKUs(ctx context.Context, s session) (all []wire.SKUItemJSON, truncated bool, err error) {
	after := ""
	for {
		var page wire.SKUPageJSON
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		if err := c.call(ctx, s, http.MethodGet, "/v1/skus", q, nil, &page); err != nil {
			return nil, false, err
		}
		all = append(all, page.SKUs...)
		if page.NextAfter == nil {
			return all, false, nil
		}
		if len(all) >= maxSalesSKUs {
			return all, true, nil
		}
		after = *page.NextAfter
	}
}
