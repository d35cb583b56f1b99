// Package reconcilejson maps reconciliation findings into their JSON,
// wire.FindingJSON: one shape for every transport that shows findings,
// the HTTP API's reports and the alert webhook's payload, so the two can
// never disagree. It maps field by field from the reconcile types, which
// carry no json tags, so a renamed Go field cannot change it. Stored
// findings have a versioned shape of their own, in internal/postgres/pgstore.
package reconcilejson
