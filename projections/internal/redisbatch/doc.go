// Package redisbatch is a Watermill message.Subscriber for Redis Streams
// consumer groups that reads, and acknowledges, in batches.
//
// watermill-redisstream's subscriber reads one entry per XREADGROUP and
// sends one XACK per entry after holding the entry until it is acked, so
// every message costs two Redis round trips and a consumer has at most one
// message in flight per reader. This subscriber instead, per subscribed
// topic (stream):
//
//   - reads with XREADGROUP GROUP g c COUNT n BLOCK t STREAMS topic > and
//     hands every message of the read to the output channel at once, without
//     waiting for the previous one's ack; at most MaxInFlightReads reads are
//     outstanding per subscription;
//   - once every message of a read is acked, acknowledges the whole read
//     with one multi-id XACK; a nacked message is sent again after
//     NackResendDelay without holding back the others of its read;
//   - takes back, at start, the entries already pending on its own consumer
//     name (XREADGROUP ... STREAMS topic 0), so a restarted process with the
//     same consumer name (see projections.ConsumerName) resumes its own work at once;
//   - every ClaimInterval, moves entries idle for ClaimMinIdle or more from
//     any consumer of the group (dead ones, in practice) to itself with
//     XAUTOCLAIM, in batches of ClaimCount, and delivers them like a read.
//
// Every message's context tells which read delivered it and how many
// messages that read delivered (ReadOf), so a handler that writes in
// batches can commit one read in one transaction.
//
// Delivery is at least once: an entry is acked only after its message is,
// and entries not acked when a subscription ends stay pending in Redis,
// for this consumer's next start or for another consumer's XAUTOCLAIM.
// Messages of one topic reach the output channel in stream order, but a
// nacked message comes back after later ones, so order is not guaranteed.
//
// Connections: a subscription issues its reads, claims and group creation
// one at a time, so it holds one connection of the client's pool; the
// Subscriber's acks are sent by one goroutine, on one more. A Subscriber
// with k subscriptions therefore needs k+1 connections (plus one
// momentarily per concurrent Subscribe call).
//
// The Redis client belongs to the caller: the Subscriber never closes it
// (watermill-redisstream's does). Close the client after Close returns.
//
// Close (or cancelling a subscription's context) stops reads within about
// BlockTime, waits up to CloseTimeout for delivered messages to be acked,
// acks what was acked, and leaves the rest pending.
package redisbatch
