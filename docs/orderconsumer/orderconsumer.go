// Package orderconsumer is the example of docs/broker-export.md: the
// order service of a flash sale, creating an order for each purchase that
// invledger's broker export publishes to NATS JetStream.
//
// It consumes with a durable consumer and explicit acknowledgements, and
// acknowledges a message only after its own write: a crash before the
// acknowledgement gets the message again. It de-duplicates by event id in
// that write (an INSERT ... ON CONFLICT (event_id) DO NOTHING in a real
// service), so a redelivery, or a message published again by
// `invledger export replay` after JetStream's de-duplication window, makes
// no second order.
package orderconsumer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/wire"
)

// Orders is the service's own store.
type Orders interface {
	// CreateOnce creates the order of purchase p, event eventID, unless
	// one exists for eventID, in one write; created is false for a repeat.
	CreateOnce(ctx context.Context, eventID string, p wire.EventJSON) (created bool, err error)
}

// Config is where the service consumes from.
type Config struct {
	// Stream is the export's stream, INVLEDGER_EVENTS by default.
	Stream string
	// Durable names the service's consumer: its position survives restarts.
	Durable string
	// Subjects filters the SKUs, e.g. invledger.events.> for all.
	Subjects string
	// RetryDelay is the wait before a message whose write failed comes again.
	RetryDelay time.Duration
}

// Run consumes until ctx ends: each deducted event becomes an order,
// acknowledged after the write; a failed write is redelivered later.
func Run(ctx context.Context, js jetstream.JetStream, cfg Config, orders Orders) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		FilterSubject: cfg.Subjects,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		// A SKU's events arrive in seq order as long as one is in flight at
		// a time; a service that needs no order across retries may raise it.
		MaxAckPending: 1,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", cfg.Durable, cfg.Stream, err)
	}
	sub, err := cons.Consume(func(m jetstream.Msg) {
		var p wire.EventJSON
		if err := json.Unmarshal(m.Data(), &p); err != nil {
			_ = m.Term() // not invledger's: never redelivered
			return
		}
		if p.Type != "deducted" {
			_ = m.Ack() // this service makes orders of purchases only
			return
		}
		if _, err := orders.CreateOnce(ctx, m.Headers().Get(jetstream.MsgIDHeader), p); err != nil {
			_ = m.NakWithDelay(cfg.RetryDelay)
			return
		}
		_ = m.Ack()
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	sub.Drain()
	<-sub.Closed()
	return nil
}
