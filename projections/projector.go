package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/internal/redisbatch"
	"github.com/invledger/invledger/projections/streamentry"
)

// ConsumerGroup is the Redis consumer group the projector reads with.
const ConsumerGroup = streamentry.ConsumerGroup

// deadLetterTopic names the poison-queue topic; the publisher behind it
// writes to the dead_letters table rather than to a broker.
const deadLetterTopic = "dead_letters"

// DeadLetterStore keeps entries, and events of entries, that can never be
// projected. event is the position of the event in its entry, or 0 for a
// whole entry: an entry that cannot be split into events, or one of one
// event.
type DeadLetterStore interface {
	AddDeadLetter(ctx context.Context, stream, streamID string, event int, fields map[string]string, reason string) error
}

// ProjectorConfig configures a Projector.
type ProjectorConfig struct {
	// NewRedisClient returns a fresh client with a pool of at least poolSize
	// connections; the projector makes one per run of its router and closes
	// it after its subscribers.
	NewRedisClient func(poolSize int) redis.UniversalClient
	// Streams are the partition streams to project, one Watermill topic each.
	Streams []string
	// ConsumerName prefixes the stable consumer names (name-0, name-1, ...).
	// Defaults to the host name, so a restarted process takes back its own
	// pending entries at once.
	ConsumerName string
	// SubscribersPerPartition is how many named consumers read each stream.
	// Each reads up to ReadCount entries at a time and holds one connection per stream
	// plus one for acks, so one is usually enough. Default 1.
	SubscribersPerPartition int
	// ReadCount is the COUNT of each XREADGROUP; a read's entries are handed
	// to the handlers at once, committed together by the group-commit
	// writer, and acked with one XACK. Default Commit.MaxEvents, so one read
	// fits one transaction.
	ReadCount int
	// ReclaimAfter is how long an entry pending on another consumer must be
	// idle before this projector takes it over (XAUTOCLAIM). Default 30s.
	ReclaimAfter time.Duration
	// ClaimInterval is how often each stream is scanned for such entries.
	// Default 5s.
	ClaimInterval time.Duration
	// RetryInitialInterval and RetryMaxInterval shape the backoff while
	// PostgreSQL is unavailable; retries never give up.
	RetryInitialInterval time.Duration
	RetryMaxInterval     time.Duration
	// NodeRuns, if set, identifies the current run of every Redis master (RedisNodeRuns.NodeRuns)
	// and EntryExists tells whether a stream entry is still in Redis. With
	// both, an entry read before a Redis crash that the restarted Redis no
	// longer holds (lost in the everysec window) is not projected but
	// dead-lettered: the reconciler reports such deductions as lost, and
	// projecting them after Redis resumed selling their seqs would collide.
	NodeRuns    func(ctx context.Context) (string, error)
	EntryExists func(ctx context.Context, stream, id string) (bool, error)
	// NodeRunsPoll is how often NodeRuns is read. Default 200ms.
	NodeRunsPoll time.Duration
	// OnDeadLetter, if set, is told about every entry stored in dead_letters,
	// after it is stored; it must not block.
	OnDeadLetter func(ctx context.Context, stream, streamID, reason string)
	Commit       GroupCommitConfig
	Logger       *slog.Logger
	Metrics      *Metrics
}

func (c *ProjectorConfig) setDefaults() {
	if c.ConsumerName == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "projector"
		}
		c.ConsumerName = host
	}
	if c.SubscribersPerPartition == 0 {
		c.SubscribersPerPartition = 1
	}
	if c.ReclaimAfter == 0 {
		c.ReclaimAfter = 30 * time.Second
	}
	if c.ClaimInterval == 0 {
		c.ClaimInterval = 5 * time.Second
	}
	if c.RetryInitialInterval == 0 {
		c.RetryInitialInterval = 100 * time.Millisecond
	}
	if c.RetryMaxInterval == 0 {
		c.RetryMaxInterval = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NodeRunsPoll == 0 {
		c.NodeRunsPoll = 200 * time.Millisecond
	}
	c.Commit.setDefaults()
	if c.ReadCount == 0 {
		c.ReadCount = c.Commit.MaxEvents
	}
}

// Validate reports every invalid setting at once.
func (c ProjectorConfig) Validate() error {
	var errs []error
	if c.NewRedisClient == nil {
		errs = append(errs, errors.New("projector: NewRedisClient is required"))
	}
	if len(c.Streams) == 0 {
		errs = append(errs, errors.New("projector: at least one stream is required"))
	}
	if c.SubscribersPerPartition < 1 {
		errs = append(errs, errors.New("projector: SubscribersPerPartition must be at least 1"))
	}
	if c.ReadCount < 1 {
		errs = append(errs, errors.New("projector: ReadCount must be at least 1"))
	}
	if c.ReclaimAfter < time.Second {
		errs = append(errs, errors.New("projector: ReclaimAfter must be at least 1s"))
	}
	if c.ClaimInterval < 10*time.Millisecond {
		errs = append(errs, errors.New("projector: ClaimInterval must be at least 10ms"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("projector: Metrics is required"))
	}
	if (c.NodeRuns == nil) != (c.EntryExists == nil) {
		errs = append(errs, errors.New("projector: set both NodeRuns and EntryExists, or neither"))
	}
	errs = append(errs, c.Commit.Validate())
	return errors.Join(errs...)
}

// Projector reads every partition stream in consumer group
// invledger-projector and writes the events into the ledger, acking each
// entry only after the transaction that holds its events committed. An
// entry is one Watermill message, however many events it holds; its
// events commit in one transaction, and a malformed one goes to
// dead_letters on its own while its siblings are projected.
type Projector struct {
	cfg      ProjectorConfig
	writer   *GroupCommitWriter
	deadLet  DeadLetterStore
	nodeRuns atomic.Pointer[string]
}

// NewProjector returns a projector writing to store.
func NewProjector(cfg ProjectorConfig, store LedgerAppender, deadLetters DeadLetterStore) (*Projector, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w, err := NewGroupCommitWriter(cfg.Commit, store, cfg.Metrics)
	if err != nil {
		return nil, err
	}
	return &Projector{cfg: cfg, writer: w, deadLet: deadLetters}, nil
}

// Run projects until ctx is done, then shuts down gracefully: handlers finish
// their in-flight batch (commit, then ack) or leave the entry pending for
// redelivery. It never acks an entry before its commit.
func (p *Projector) Run(ctx context.Context) error {
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { p.writer.Run(writerCtx) })
	if p.cfg.NodeRuns != nil {
		wg.Go(func() { p.watchNodeRuns(writerCtx) })
	}
	defer func() {
		stopWriter()
		wg.Wait()
	}()
	// Redis being down or still loading its AOF when the subscriptions are
	// made is not a reason to stop projecting: start over until it answers,
	// as commits are retried until PostgreSQL answers.
	backoff := p.cfg.RetryInitialInterval
	for {
		// Entries delivered to our consumer names before this attempt began
		// are left over from an earlier one (or a crashed process): the
		// subscribers take them back at once.
		err := p.route(ctx)
		if ctx.Err() != nil {
			// A shutdown, also one that arrives while subscriptions are still
			// being set up: nothing was read that is not left pending.
			return nil
		}
		p.cfg.Logger.Warn("projector stopped; starting it again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.cfg.RetryMaxInterval)
	}
}

// route runs one router over fresh subscribers until ctx is done or the
// router fails; the subscribers, and their Redis clients, are closed after.
func (p *Projector) route(ctx context.Context) error {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, newRouterLogger(p.cfg.Logger))
	if err != nil {
		return fmt.Errorf("projector router: %w", err)
	}
	deadLetters := &deadLetterPublisher{store: p.deadLet, metrics: p.cfg.Metrics, logger: p.cfg.Logger, notify: p.cfg.OnDeadLetter}
	poison, err := middleware.PoisonQueueWithFilter(deadLetters, deadLetterTopic, func(err error) bool {
		return errors.Is(err, streamentry.ErrMalformedEntry) || errors.Is(err, ErrLostEntry)
	})
	if err != nil {
		return fmt.Errorf("projector poison queue: %w", err)
	}
	// Order matters: the poison queue sits outside Retry, so malformed
	// entries (those that cannot be split into events, and those lost by
	// a Redis restart) skip the retries and everything else is retried, with backoff
	// and without limit, until PostgreSQL answers again.
	router.AddMiddleware(
		middleware.Recoverer,
		poison,
		middleware.Retry{
			MaxRetries:          math.MaxInt32,
			InitialInterval:     p.cfg.RetryInitialInterval,
			MaxInterval:         p.cfg.RetryMaxInterval,
			Multiplier:          2,
			RandomizationFactor: 0.2,
			ResetContextOnRetry: true,
			ShouldRetry: func(rp middleware.RetryParams) bool {
				return !errors.Is(rp.Err, streamentry.ErrMalformedEntry) && !errors.Is(rp.Err, ErrLostEntry)
			},
			OnRetryHook: func(n int, delay time.Duration) {
				if n == 1 || n%10 == 0 {
					p.cfg.Logger.Warn("projector retrying a commit", "attempt", n, "next_delay", delay)
				}
			},
		}.Middleware,
	)

	// The subscribers do not close their client: it is closed after them.
	client := p.cfg.NewRedisClient(p.cfg.SubscribersPerPartition*(len(p.cfg.Streams)+1) + 4)
	var subs []*redisbatch.Subscriber
	defer func() {
		for _, sub := range subs {
			_ = sub.Close()
		}
		_ = client.Close()
	}()
	for i := range p.cfg.SubscribersPerPartition {
		consumer := fmt.Sprintf("%s-%d", p.cfg.ConsumerName, i)
		sub, err := redisbatch.NewSubscriber(redisbatch.SubscriberConfig{
			Client:        client,
			ConsumerGroup: ConsumerGroup,
			Consumer:      consumer,
			OldestID:      "0",
			// the node runs are stamped as the read answers (see entryUnmarshaller).
			Unmarshaller:    entryUnmarshaller{nodeRuns: &p.nodeRuns},
			StreamIDKey:     streamentry.StreamIDField,
			ReadCount:       int64(p.cfg.ReadCount),
			NackResendDelay: 100 * time.Millisecond,
			ClaimInterval:   p.cfg.ClaimInterval,
			ClaimMinIdle:    p.cfg.ReclaimAfter,
			CloseTimeout:    15 * time.Second,
			Logger:          p.cfg.Logger,
		})
		if err != nil {
			return fmt.Errorf("projector subscriber %s: %w", consumer, err)
		}
		subs = append(subs, sub)
		for _, stream := range p.cfg.Streams {
			// A message's malformed events are the handler's produced
			// messages: the router stores them in dead_letters before it
			// acks the entry, and nacks it when it cannot.
			router.AddHandler(fmt.Sprintf("project %s %s", stream, consumer), stream, sub, deadLetterTopic, deadLetters, p.handle)
		}
	}
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	return nil
}

// handle projects the events of one entry in one submit and returns a
// dead letter for each event that is malformed or that the ledger refused.
// An entry that cannot be split into events, or that a Redis restart lost,
// is an error: the poison queue stores it whole.
func (p *Projector) handle(msg *message.Message) ([]*message.Message, error) {
	entry, err := streamentry.ParseEntryEvents(msg.Metadata)
	if err != nil {
		return nil, err
	}
	if err := p.checkNotLost(msg); err != nil {
		return nil, err
	}
	var (
		events []domain.Event
		at     []int // the position in the entry of each of events
		dead   []*message.Message
	)
	for i, ee := range entry {
		if ee.Err != nil {
			dead = append(dead, deadEvent(msg, i, ee.Err))
			continue
		}
		events, at = append(events, ee.Event), append(at, i)
	}
	if len(events) == 0 {
		return dead, nil
	}
	read, _ := redisbatch.ReadOf(msg.Context())
	refused, err := p.writer.submit(msg.Context(), events, read)
	if err != nil {
		return nil, err
	}
	for j, err := range refused {
		if err != nil {
			dead = append(dead, deadEvent(msg, at[j], err))
		}
	}
	return dead, nil
}

// deadEventKey carries, in a dead event's message, the event's position in
// its entry.
const deadEventKey = "_dead_letter_event"

// deadEvent is the dead letter of event i of the entry msg delivered, in
// the form the poison queue gives a whole entry's, so one publisher stores
// both.
func deadEvent(msg *message.Message, i int, err error) *message.Message {
	d := message.NewMessage(watermill.NewUUID(), nil)
	d.Metadata = streamentry.EventFields(msg.Metadata, i)
	d.Metadata[deadEventKey] = strconv.Itoa(i)
	d.Metadata[middleware.ReasonForPoisonedKey] = err.Error()
	d.Metadata[middleware.PoisonedTopicKey] = message.SubscribeTopicFromCtx(msg.Context())
	d.SetContext(msg.Context())
	return d
}

// checkNotLost refuses an entry read under an earlier Redis run that the
// current run no longer holds. Entries read under the current run need no
// check, so the cost falls only on the few messages in flight at a restart.
func (p *Projector) checkNotLost(msg *message.Message) error {
	current := p.nodeRuns.Load()
	readUnder, stamped := msg.Metadata[nodeRunsKey]
	if p.cfg.EntryExists == nil || current == nil || !stamped || readUnder == *current {
		return nil
	}
	stream := message.SubscribeTopicFromCtx(msg.Context())
	exists, err := p.cfg.EntryExists(msg.Context(), stream, msg.Metadata[streamentry.StreamIDField])
	if err != nil {
		return fmt.Errorf("check stream entry after a redis restart: %w", err)
	}
	if !exists {
		return fmt.Errorf("%w: read before Redis restarted, and the restarted Redis no longer holds it", ErrLostEntry)
	}
	return nil
}

func (p *Projector) watchNodeRuns(ctx context.Context) {
	t := time.NewTicker(p.cfg.NodeRunsPoll)
	defer t.Stop()
	for {
		if e, err := p.cfg.NodeRuns(ctx); err == nil {
			p.nodeRuns.Store(&e)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deadLetterPublisher stores in dead_letters the entries the poison queue
// hands it and the events the handler returns. If that fails the entry's
// message is nacked and comes back.
type deadLetterPublisher struct {
	store   DeadLetterStore
	metrics *Metrics
	logger  *slog.Logger
	notify  func(ctx context.Context, stream, streamID, reason string)
}

func (d *deadLetterPublisher) Publish(_ string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		reason := msg.Metadata.Get(middleware.ReasonForPoisonedKey)
		fields := make(map[string]string, len(msg.Metadata))
		for k, v := range msg.Metadata {
			switch k {
			case middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey,
				middleware.PoisonedHandlerKey, middleware.PoisonedSubscriberKey, deadEventKey:
			default:
				fields[k] = v
			}
		}
		stream := msg.Metadata.Get(middleware.PoisonedTopicKey)
		streamID := fields[streamentry.StreamIDField]
		event, _ := strconv.Atoi(msg.Metadata.Get(deadEventKey)) // 0: a whole entry
		if err := d.store.AddDeadLetter(msg.Context(), stream, streamID, event, fields, reason); err != nil {
			return err
		}
		d.metrics.deadLetters.Inc()
		if d.notify != nil {
			d.notify(msg.Context(), stream, streamID, reason)
		} else {
			d.logger.Error("stream entry sent to dead_letters", "stream", stream, "stream_id", streamID, "event", event, "reason", reason)
		}
	}
	return nil
}

func (d *deadLetterPublisher) Close() error { return nil }
