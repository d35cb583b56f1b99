// Package projector projects the partition streams into the PostgreSQL
// ledger with Watermill: at-least-once delivery made exactly-once by an
// idempotent, order-independent, group-committed insert.
package projections
