// Package reconcile compares Redis with the ledger, SKU by SKU, reports every
// difference the in-flight events do not explain, records it, alerts, and
// repairs it. It also verifies SKUs after a Redis restart, so that purchases
// resume only on a Redis that agrees with the ledger.
package reconcile
