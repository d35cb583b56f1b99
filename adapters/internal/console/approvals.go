package console

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/invledger/invledger/adapters/wire"
)

type adjustmentRow struct {
	wire.AdjustmentJSON
	// OwnRequest is set when the signed-in user requested it: the API
	// refuses their approval, and the page says why beside a disabled button.
	OwnRequest bool
}

type approvalsView struct {
	Pending, Recent []adjustmentRow
	Status          string
}

// approvals lists the pending adjustments, with approve and reject for
// approvers, and the request form for operators, then the recent decisions.
func (c *Console) approvals(w http.ResponseWriter, r *http.Request, s session) {
	var v approvalsView
	for _, part := range []struct {
		status string
		into   *[]adjustmentRow
	}{{"pending", &v.Pending}, {"", &v.Recent}} {
		q := url.Values{"limit": {"50"}}
		if part.status != "" {
			q.Set("status", part.status)
		}
		var page wire.AdjustmentPageJSON
		if err := c.call(r.Context(), s, http.MethodGet, "/v1/adjustments", q, nil, &page); err != nil {
			c.pageError(w, r, s, err)
			return
		}
		for _, a := range page.Adjustments {
			if part.status == "" && a.Status == "pending" {
				continue
			}
			*part.into = append(*part.into, adjustmentRow{AdjustmentJSON: a, OwnRequest: strings.EqualFold(a.RequestedBy, s.Name)})
		}
	}
	c.render(w, r, http.StatusOK, "approvals", s, v)
}

// requestAdjustment sends the request form to POST /v1/adjustments.
func (c *Console) requestAdjustment(w http.ResponseWriter, r *http.Request, s session) {
	delta, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("delta")), 10, 64)
	if err != nil {
		c.back(w, r, Prefix+"approvals", s, errors.New("delta: a whole number of units, such as 5 or -3"), "")
		return
	}
	body := map[string]any{"sku": strings.TrimSpace(r.PostFormValue("sku")), "delta": delta, "reason": r.PostFormValue("reason")}
	var a wire.AdjustmentJSON
	err = c.call(r.Context(), s, http.MethodPost, "/v1/adjustments", nil, body, &a)
	c.afterForm(w, r, s, Prefix+"approvals", err, "Adjustment "+strconv.FormatInt(a.ID, 10)+" requested; it waits for an approver.")
}

// decide sends approve or reject to the API, which refuses an approver
// deciding their own request whatever this page showed.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, s session) {
	id, decision := r.PathValue("id"), r.PathValue("decision")
	if _, err := strconv.ParseInt(id, 10, 64); err != nil || (decision != "approve" && decision != "reject") {
		http.NotFound(w, r)
		return
	}
	var a wire.AdjustmentJSON
	err := c.call(r.Context(), s, http.MethodPost, "/v1/adjustments/"+id+"/"+decision, nil, nil, &a)
	c.afterForm(w, r, s, Prefix+"approvals", err, "Adjustment "+id+" is now "+a.Status+".")
}

// afterForm sends the browser back to path: with the API's refusal shown,
// or with done. Failures of the servers themselves are pages of their own.
func (c *Console) afterForm(w http.ResponseWriter, r *http.Request, s session, path string, err error, done string) {
	if err != nil {
		if _, ok := userError(err); !ok {
			c.fail(w, r, s, err)
			return
		}
	}
	c.back(w, r, path, s, err, done)
}
