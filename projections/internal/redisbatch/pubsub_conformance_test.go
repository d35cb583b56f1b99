//go:build !race

// Watermill's conformance suite turns its short mode off under -race and
// then runs for many minutes, so it is built without the race detector
// only; scripts/test.sh runs it in a `go test` of its own.

package redisbatch_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/projections/internal/redisbatch"
)

// TestPubSub runs Watermill's own conformance suite with
// watermill-redisstream's Publisher (and so its Marshaller) as the
// counterpart, as watermill-redisstream's own pubsub_test.go does: every
// constructor call without a group makes a new consumer group, so each new
// subscriber reads the topic from its start.
func TestPubSub(t *testing.T) {
	srv := localstacktest.Redis(t, func(c *localstack.RedisConfig) { c.DisableAppendOnly = true })
	features := tests.Features{
		ConsumerGroups:      true,
		ExactlyOnceDelivery: false,
		// A read's messages are delivered without waiting for each other's
		// ack, and a nacked one comes back after later ones: neither with
		// many subscribers nor with one is the order guaranteed.
		GuaranteedOrder:                     false,
		GuaranteedOrderWithSingleSubscriber: false,
		Persistent:                          true,
		RequireSingleInstance:               false,
		NewSubscriberReceivesOldMessages:    true,
		// Restarting the server is tested by the projector's own tests.
		RestartServiceCommand: nil,
	}
	newPubSub := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		pub, err := redisstream.NewPublisher(redisstream.PublisherConfig{Client: newClient(srv.Addr())}, watermill.NopLogger{})
		if err != nil {
			t.Fatal(err)
		}
		client := newClient(srv.Addr())
		sub, err := redisbatch.NewSubscriber(redisbatch.SubscriberConfig{
			Client:        client,
			ConsumerGroup: group,
			Consumer:      watermill.NewShortUUID(),
			ReadCount:     100,
			// Short, as watermill-redisstream's suite run sets them, so the
			// suite's many Close calls stay quick: TestConcurrentSubscribe
			// closes 50 subscribers one after another, each holding a
			// message its multiplier received and will never ack, so each
			// Close waits its CloseTimeout.
			BlockTime:     100 * time.Millisecond,
			ClaimInterval: time.Second,
			ClaimMinIdle:  5 * time.Second,
			CloseTimeout:  100 * time.Millisecond,
			Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = sub.Close()
			_ = client.Close() // the subscriber does not close its client
		})
		return pub, sub
	}
	tests.TestPubSub(t, features,
		func(t *testing.T) (message.Publisher, message.Subscriber) {
			return newPubSub(t, watermill.NewShortUUID())
		},
		newPubSub,
	)
}

func newClient(addr string) redis.UniversalClient {
	return redis.NewClient(&redis.Options{Addr: addr})
}
