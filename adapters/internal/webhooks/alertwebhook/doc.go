// Package alertwebhook delivers invledger's alerts to a webhook: one JSON
// POST per alert (a reconciliation finding, a dead-lettered stream entry, or
// SKUs left fenced after verification), from a bounded queue, with retries,
// so a slow or failing receiver never blocks the reconciler or the
// projector.
//
// The request bodies are this package's own wire types, mapped field by
// field from the reconciler's, so renaming a Go field never changes what
// receivers parse; the schema is in docs/webhooks.md under "Alert webhook schema",
// and fields are only ever added. Deliveries are counted in
// invledger_alert_webhook_deliveries_total{result}.
package alertwebhook
