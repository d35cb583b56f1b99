package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/invledger/invledger/adapters/wire"
)

type skuViewJSON = wire.SKUViewJSON

func pathSegment(s string) string { return url.PathEscape(s) }

// historyPageSize is the events of one history page.
const historyPageSize = 50

// chainRow is a ledger event with the state of its link in the SKU's
// hash chain, as far as this page can tell from the links themselves.
type chainRow struct {
	wire.AuditEntryJSON
	Chain string // "linked", "not sealed yet" or "break"
}

type skuView struct {
	SKU        skuViewJSON
	LagEvents  int64
	History    []chainRow
	HistoryAt  int64 // the after cursor of this page
	NextAfter  *int64
	PrevAfter  int64
	HasPrev    bool
	At         string
	Balance    *wire.StockAtJSON
	BalanceErr string
	Buyers     wire.BuyersJSON
	BuyersAt   string
	Refusals   map[string]int64
}

// skuPage is one SKU, live: figures, chart and newest events fed by the
// feed, plus the paged history with chain status, the balance at an
// instant (?at=) and the buyers (?buyers_after=).
func (c *Console) skuPage(w http.ResponseWriter, r *http.Request, s session) {
	sku := r.PathValue("sku")
	q := r.URL.Query()
	v := skuView{At: q.Get("at"), BuyersAt: q.Get("buyers_after")}
	v.Refusals, _ = c.cfg.Refusals(r.Context(), sku) // the feed fills them in when Redis answers later
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+pathSegment(sku), nil, nil, &v.SKU); err != nil {
		c.pageError(w, r, s, err)
		return
	}
	if v.SKU.RedisSeq != nil && v.SKU.LedgerSeq != nil {
		v.LagEvents = max(0, *v.SKU.RedisSeq-*v.SKU.LedgerSeq)
	}
	v.HistoryAt, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	v.HistoryAt = max(v.HistoryAt, 0)
	// One event before the page is read too, for the first row's link.
	from := max(v.HistoryAt-1, 0)
	var h wire.HistoryPageJSON
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+pathSegment(sku)+"/events",
		url.Values{"after": {strconv.FormatInt(from, 10)}, "limit": {strconv.Itoa(historyPageSize + 1)}}, nil, &h); err != nil {
		c.pageError(w, r, s, err)
		return
	}
	v.History = chainStatus(h.Events, v.HistoryAt)
	if len(v.History) > historyPageSize {
		v.History = v.History[:historyPageSize]
	}
	if len(v.History) == historyPageSize {
		next := v.History[len(v.History)-1].Seq
		v.NextAfter = &next
	}
	v.HasPrev, v.PrevAfter = v.HistoryAt > 0, max(v.HistoryAt-historyPageSize, 0)
	if v.At != "" {
		var b wire.StockAtJSON
		if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+pathSegment(sku)+"/balance", url.Values{"at": {v.At}}, nil, &b); err != nil {
			if msg, ok := userError(err); ok {
				v.BalanceErr = msg
			} else {
				c.fail(w, r, s, err)
				return
			}
		} else {
			v.Balance = &b
		}
	}
	bq := url.Values{"limit": {"50"}}
	if v.BuyersAt != "" {
		bq.Set("after", v.BuyersAt)
	}
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/skus/"+pathSegment(sku)+"/buyers", bq, nil, &v.Buyers); err != nil {
		c.pageError(w, r, s, err)
		return
	}
	c.render(w, r, http.StatusOK, "sku", s, v)
}

// chainStatus labels each event after seq `after` by its link: linked when
// its prev_hash is the previous event's hash, "not sealed yet" while the
// sealer has not reached it, and "break" otherwise. Recomputing the hashes
// is `invledger verify`'s job.
func chainStatus(events []wire.AuditEntryJSON, after int64) []chainRow {
	var rows []chainRow
	prev, known := "", after == 0
	for _, e := range events {
		if e.Seq <= after {
			prev, known = e.Hash, e.Hash != ""
			continue
		}
		row := chainRow{AuditEntryJSON: e}
		switch {
		case e.Hash == "":
			row.Chain = "not sealed yet"
		case !known || e.PrevHash == prev:
			row.Chain = "linked"
		default:
			row.Chain = "break"
		}
		prev, known = e.Hash, e.Hash != ""
		rows = append(rows, row)
	}
	return rows
}

// pageError shows an API refusal (a SKU that does not exist, a bad query)
// as a page with the API's words; anything else goes to fail.
func (c *Console) pageError(w http.ResponseWriter, r *http.Request, s session, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		c.render(w, r, ae.Status, "error", s, errorView{Title: http.StatusText(ae.Status), Message: ae.Error()})
		return
	}
	c.fail(w, r, s, err)
}
