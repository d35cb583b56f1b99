package eventtail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// Config says what to follow and how.
type Config struct {
	// Client reads the stream; required. It belongs to the tail from then
	// on: watermill-redisstream's Subscriber closes it when Follow returns.
	Client redis.UniversalClient
	// Keys maps the SKU to its partition stream.
	Keys redisinventory.Keyspace
	// SKU is the SKU whose events are followed; required unless Partition
	// is set.
	SKU string
	// Partition, with no SKU, follows every SKU of this partition stream
	// instead: one reader for all of them.
	Partition *int
	// FromStart replays the events the stream still holds (the janitor
	// keeps acked entries for the stream retention, 1h by default) before
	// following new ones. Otherwise only events appended after Follow
	// started are seen.
	FromStart bool
	// BlockTime bounds each blocking XREAD, and so how long Follow can take
	// to return once ctx is done. Default 1s.
	BlockTime time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.BlockTime == 0 {
		c.BlockTime = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("eventtail: Client is required"))
	}
	switch {
	case c.Partition == nil:
		if _, err := domain.NewSKUID(c.SKU); err != nil {
			errs = append(errs, fmt.Errorf("--sku: %w", err))
		}
	case c.SKU != "":
		errs = append(errs, errors.New("eventtail: SKU and Partition are exclusive"))
	case *c.Partition < 0 || *c.Partition >= c.Keys.Partitions():
		errs = append(errs, fmt.Errorf("eventtail: Partition %d is not one of the %d", *c.Partition, c.Keys.Partitions()))
	}
	if c.BlockTime < time.Millisecond {
		errs = append(errs, errors.New("eventtail: BlockTime must be at least 1ms"))
	}
	return errors.Join(errs...)
}

// Follow calls fn with each event of cfg.SKU (or of cfg.Partition), in
// stream order, as it is appended, until ctx is done (then it returns nil) or fn fails (then it
// returns fn's error). An entry of a batch holds several events, handed
// to fn one by one in their order. Entries and events that cannot be
// decoded are logged and skipped: the projector sends them to
// dead_letters.
func Follow(ctx context.Context, cfg Config, fn func(domain.Event) error) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The tail owns the client, so the hook stays with this subscriber's
	// reads alone.
	cfg.Client.AddHook(streamIDHook{})
	from := "$"
	if cfg.FromStart {
		from = "0"
	}
	sub, err := redisstream.NewSubscriber(redisstream.SubscriberConfig{
		Client:         cfg.Client,
		Unmarshaller:   entryUnmarshaller{},
		FanOutOldestId: from,
		BlockTime:      cfg.BlockTime,
		// Without it the first XREAD blocks with no timeout, and Close
		// would wait for the next event.
		DisableIndefiniteInitialBlock: true,
	}, watermill.NewSlogLoggerWithLevelMapping(cfg.Logger, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug}))
	if err != nil {
		return fmt.Errorf("eventtail: %w", err)
	}
	defer sub.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := cfg.Keys.SKUStreamKey(cfg.SKU)
	if cfg.Partition != nil {
		stream = cfg.Keys.StreamKey(*cfg.Partition)
	}
	msgs, err := sub.Subscribe(ctx, stream)
	if err != nil {
		return fmt.Errorf("eventtail: subscribe: %w", err)
	}
	for msg := range msgs {
		msg.Ack() // fan-out: nothing to acknowledge in Redis; the next read waits for it
		entry, err := streamentry.ParseEntryEvents(msg.Metadata)
		if err != nil {
			cfg.Logger.Warn("eventtail: skipping an entry that cannot be decoded", "sku", cfg.SKU, "err", err)
			continue
		}
		for _, ee := range entry {
			if err := follow(cfg, ee, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// follow hands one event of an entry to fn if it is one of cfg's.
func follow(cfg Config, ee streamentry.EntryEvent, fn func(domain.Event) error) error {
	e := ee.Event
	if ee.Err != nil {
		cfg.Logger.Warn("eventtail: skipping an event that cannot be decoded", "sku", cfg.SKU, "err", ee.Err)
		return nil
	}
	if cfg.Partition == nil && e.SKU != cfg.SKU {
		return nil // another SKU of the same partition
	}
	return fn(e)
}

// streamIDHook adds each entry's stream id to the values an XREAD
// answers, under streamentry.StreamIDField: watermill-redisstream's
// Subscriber hands its Unmarshaller the values alone, and an event's time
// is its entry's id.
type streamIDHook struct{}

func (streamIDHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (streamIDHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (streamIDHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if xs, ok := cmd.(*redis.XStreamSliceCmd); ok && err == nil {
			for _, stream := range xs.Val() {
				for _, m := range stream.Messages {
					m.Values[streamentry.StreamIDField] = m.ID
				}
			}
		}
		return err
	}
}

// entryUnmarshaller turns a partition-stream entry, with the stream id
// streamIDHook added, into a message whose metadata holds its fields. It
// never fails: watermill-redisstream ends the subscription on an
// Unmarshal error, and ParseEntryEvents reports an entry without its id.
type entryUnmarshaller struct{}

func (entryUnmarshaller) Unmarshal(values map[string]any) (*message.Message, error) {
	fields := streamentry.EntryFields(values)
	msg := message.NewMessage(fields["event_id"], nil)
	msg.Metadata = fields
	return msg, nil
}
