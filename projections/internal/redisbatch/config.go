package redisbatch

import (
	"errors"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"
)

// Unmarshaller turns a stream entry's fields into a message. It is the same
// interface as watermill-redisstream's, so redisstream's
// DefaultMarshallerUnmarshaller (the default) reads what its Publisher
// writes. It is called as soon as the read that returned the entry
// answers, before any message of that read is delivered.
type Unmarshaller interface {
	Unmarshal(values map[string]any) (*message.Message, error)
}

var _ Unmarshaller = redisstream.DefaultMarshallerUnmarshaller{}

// DefaultStreamIDKey is the metadata key that carries a message's stream
// entry id unless SubscriberConfig.StreamIDKey names another.
const DefaultStreamIDKey = "_redis_stream_id"

// Where a batch of entries came from, as told to Hooks.Read.
const (
	SourceNew     = "new"     // XREADGROUP ... >
	SourcePending = "pending" // XREADGROUP ... 0: this consumer's own pending entries, at start
	SourceClaimed = "claimed" // XAUTOCLAIM
)

// Hooks are optional observers, for metrics. They are called from the
// subscriber's goroutines and must not block.
type Hooks struct {
	// Read is told the size of every non-empty batch read or claimed.
	Read func(topic, source string, entries int)
	// Acked is told the size of every XACK that succeeded.
	Acked func(topic string, entries int)
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Client is the Redis client; required. The Subscriber does not close
	// it: its owner does, after Close returned. Its pool needs one
	// connection per subscription plus one.
	Client redis.UniversalClient
	// ConsumerGroup is the group every subscription reads in; required.
	// It is created (with MKSTREAM) on Subscribe if missing, at OldestID.
	ConsumerGroup string
	// Consumer is this process's consumer name; required. It must be
	// stable across restarts of one process instance, so a restart takes
	// back its own pending entries, and unique across live processes: see
	// ConsumerName.
	Consumer string
	// OldestID is where a group created by Subscribe starts. Default "0",
	// the start of the stream.
	OldestID string
	// Unmarshaller turns entries into messages. Default:
	// redisstream.DefaultMarshallerUnmarshaller. An entry it refuses is
	// logged and left pending, never acked unseen; an Unmarshaller that
	// never fails (and lets the handler reject bad entries) avoids that.
	Unmarshaller Unmarshaller
	// StreamIDKey is the metadata key set to each message's stream entry
	// id. Default DefaultStreamIDKey.
	StreamIDKey string
	// ReadCount is the COUNT of each XREADGROUP. Default 1000.
	ReadCount int64
	// BlockTime is the BLOCK of each XREADGROUP ... >; it bounds how long a
	// read can outlive Close. Default 1s; at most 10s.
	BlockTime time.Duration
	// MaxInFlightReads is how many reads of one subscription may have
	// messages not yet acked; the next read waits for a slot. Default 2.
	MaxInFlightReads int
	// NackResendDelay is how long after a Nack the message is delivered
	// again. Default 100ms; a negative value resends at once.
	NackResendDelay time.Duration
	// ClaimInterval is how often each subscription looks for idle pending
	// entries to claim. Default 5s.
	ClaimInterval time.Duration
	// ClaimMinIdle is how long an entry must have been pending, unacked,
	// before any consumer may claim it: longer than a message can take to
	// be handled. Default 30s.
	ClaimMinIdle time.Duration
	// ClaimCount is the COUNT of each XAUTOCLAIM. Default ReadCount.
	ClaimCount int64
	// CloseTimeout is how long Close, or the end of a subscription's
	// context, waits for delivered messages to be acked. Default 5s.
	CloseTimeout time.Duration
	// RetryMaxInterval caps the backoff between failed Redis commands.
	// Default 2s.
	RetryMaxInterval time.Duration
	Hooks            Hooks
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// maxBlockTime keeps every read short enough for Close to be prompt.
const maxBlockTime = 10 * time.Second

func (c *SubscriberConfig) setDefaults() {
	if c.OldestID == "" {
		c.OldestID = "0"
	}
	if c.Unmarshaller == nil {
		c.Unmarshaller = redisstream.DefaultMarshallerUnmarshaller{}
	}
	if c.StreamIDKey == "" {
		c.StreamIDKey = DefaultStreamIDKey
	}
	if c.ReadCount == 0 {
		c.ReadCount = 1000
	}
	if c.BlockTime == 0 {
		c.BlockTime = time.Second
	}
	if c.MaxInFlightReads == 0 {
		c.MaxInFlightReads = 2
	}
	if c.NackResendDelay == 0 {
		c.NackResendDelay = 100 * time.Millisecond
	}
	if c.ClaimInterval == 0 {
		c.ClaimInterval = 5 * time.Second
	}
	if c.ClaimMinIdle == 0 {
		c.ClaimMinIdle = 30 * time.Second
	}
	if c.ClaimCount == 0 {
		c.ClaimCount = c.ReadCount
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 5 * time.Second
	}
	if c.RetryMaxInterval == 0 {
		c.RetryMaxInterval = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once. It expects defaults to be
// applied, as NewSubscriber does.
func (c SubscriberConfig) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("redisbatch: Client is required"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("redisbatch: ConsumerGroup is required"))
	}
	if c.Consumer == "" {
		errs = append(errs, errors.New("redisbatch: Consumer is required"))
	}
	if c.ReadCount < 1 {
		errs = append(errs, errors.New("redisbatch: ReadCount must be at least 1"))
	}
	if c.BlockTime < time.Millisecond || c.BlockTime > maxBlockTime {
		errs = append(errs, errors.New("redisbatch: BlockTime must be between 1ms and 10s"))
	}
	if c.MaxInFlightReads < 1 {
		errs = append(errs, errors.New("redisbatch: MaxInFlightReads must be at least 1"))
	}
	if c.ClaimInterval < time.Millisecond {
		errs = append(errs, errors.New("redisbatch: ClaimInterval must be at least 1ms"))
	}
	if c.ClaimMinIdle < time.Millisecond {
		errs = append(errs, errors.New("redisbatch: ClaimMinIdle must be at least 1ms"))
	}
	if c.ClaimCount < 1 {
		errs = append(errs, errors.New("redisbatch: ClaimCount must be at least 1"))
	}
	if c.CloseTimeout < 0 {
		errs = append(errs, errors.New("redisbatch: CloseTimeout must not be negative"))
	}
	if c.RetryMaxInterval < time.Millisecond {
		errs = append(errs, errors.New("redisbatch: RetryMaxInterval must be at least 1ms"))
	}
	return errors.Join(errs...)
}
