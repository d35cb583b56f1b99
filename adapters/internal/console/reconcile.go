package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/invledger/invledger/adapters/wire"
)

type reconcileView struct {
	Runs      []wire.RunJSON
	NextAfter *int64
	// Confirm asks again for a repair sent without its confirmation, as a
	// browser without JavaScript (no dialog) sends it.
	Confirm    bool
	ConfirmSKU string
}

// reconciliation lists the recorded runs, newest first, with their
// findings' figures before and after; operators may run one.
func (c *Console) reconciliation(w http.ResponseWriter, r *http.Request, s session) {
	var page wire.RunPageJSON
	q := r.URL.Query()
	pq := map[string][]string{"limit": {"20"}}
	if a := q.Get("after"); a != "" {
		pq["after"] = []string{a}
	}
	if err := c.call(r.Context(), s, http.MethodGet, "/v1/reconciliations", pq, nil, &page); err != nil {
		c.pageError(w, r, s, err)
		return
	}
	c.render(w, r, http.StatusOK, "reconciliation", s, reconcileView{Runs: page.Runs, NextAfter: page.NextAfter})
}

// runReconcile runs a reconciliation, of one SKU or all. A repair writes to
// Redis, so it needs confirm=yes, which the page's dialog adds; without it
// the page asks again.
func (c *Console) runReconcile(w http.ResponseWriter, r *http.Request, s session) {
	sku := strings.TrimSpace(r.PostFormValue("sku"))
	repair := r.PostFormValue("repair") == "yes"
	if repair && r.PostFormValue("confirm") != "yes" {
		c.render(w, r, http.StatusOK, "reconciliation", s, reconcileView{Confirm: true, ConfirmSKU: sku})
		return
	}
	body := map[string]any{"repair": repair}
	if sku != "" {
		body["sku"] = sku
	}
	var rep wire.ReconcileReportJSON
	err := c.call(r.Context(), s, http.MethodPost, "/v1/reconcile", nil, body, &rep)
	done := "Run " + strconv.FormatInt(rep.RunID, 10) + ": " + strconv.Itoa(rep.Checked) + " SKU(s) checked, " +
		strconv.Itoa(len(rep.Drifts)) + " finding(s), " + strconv.Itoa(len(rep.Repaired)) + " repaired."
	c.afterForm(w, r, s, Prefix+"reconciliation", err, done)
}
