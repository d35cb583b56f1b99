// Package brokerexport publishes every ledger event to a message broker
// (NATS JetStream, RabbitMQ), exactly once per event after
// de-duplication and in seq order per SKU, for integrators such as an
// order service that consumes purchases from a queue.
//
// The export reads the ledger in PostgreSQL after projection, as the
// webhook deliverer does, never the Redis streams: an event still on its
// way to the ledger, or dead-lettered, holds back the later events of its
// SKU. Each broker keeps a cursor per SKU (export_cursors) that moves only
// after the broker confirmed the publish. Each message carries the event's
// id as the broker's de-duplication id and the SKU and seq as headers; a
// Publisher that can read what its broker holds (JetStream) resumes from
// there and has the broker refuse a publish out of order, so a kill -9
// stores nothing twice.
//
// One process of a deployment exports, elected by a PostgreSQL advisory
// lock (serve's export component); a broker that is down or refuses is
// reported (logs naming the setting to fix, metrics, readiness), and only
// the export waits: it never stops sales.
package brokerexport
