package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("redisbatch: subscriber closed")

var _ message.Subscriber = (*Subscriber)(nil)

// Subscriber reads Redis Streams in one consumer group under one consumer
// name, in batches; see the package documentation. It is safe for
// concurrent use.
type Subscriber struct {
	cfg     SubscriberConfig
	closing chan struct{} // closed by Close

	mu       sync.Mutex
	closed   bool
	subs     sync.WaitGroup                 // running subscriptions
	inflight map[string]map[string]struct{} // topic → ids delivered (or being acked) here

	acks      chan ackRequest // to the acker; closed once every subscription ended
	ackerDone chan struct{}
}

// ackRequest asks the acker to XACK the acked entries of one read.
type ackRequest struct {
	topic string
	ids   []string
}

// NewSubscriber returns a Subscriber; it starts no read until Subscribe.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Subscriber{
		cfg:       cfg,
		closing:   make(chan struct{}),
		inflight:  map[string]map[string]struct{}{},
		acks:      make(chan ackRequest, 64),
		ackerDone: make(chan struct{}),
	}
	go s.ackLoop()
	return s, nil
}

// Subscribe creates the consumer group on topic if it does not exist and
// starts reading topic in it. The returned channel is closed once the
// subscription ended: after Close or the end of ctx, and after the wait for
// acks that follows (see CloseTimeout). Every message's context is done
// once the message is acked or nacked, and when ctx is.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.subs.Add(1)
	s.mu.Unlock()
	if err := s.createGroup(ctx, topic); err != nil {
		s.subs.Done()
		return nil, err
	}
	sub := newSubscription(ctx, s, topic)
	go sub.run()
	return sub.out, nil
}

// Close stops every subscription: reads end within about BlockTime, and
// delivered messages have CloseTimeout to be acked. It returns once every
// output channel is closed and the acked entries were acknowledged in
// Redis (best effort: an entry whose XACK fails stays pending and is
// delivered again later). It does not close the Redis client.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.ackerDone
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()

	s.subs.Wait()
	close(s.acks)
	<-s.ackerDone
	return nil
}

func (s *Subscriber) createGroup(ctx context.Context, topic string) error {
	err := s.cfg.Client.XGroupCreateMkStream(ctx, topic, s.cfg.ConsumerGroup, s.cfg.OldestID).Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("redisbatch: create group %s on %s: %w", s.cfg.ConsumerGroup, topic, err)
	}
	return nil
}

// track marks ids of topic as in flight here and returns those that were
// not already: an entry read again from the pending list, or claimed back
// because its handler is slow, must not be delivered twice at once.
func (s *Subscriber) track(topic string, ids []string) (fresh []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.inflight[topic]
	if set == nil {
		set = map[string]struct{}{}
		s.inflight[topic] = set
	}
	for _, id := range ids {
		if _, busy := set[id]; busy {
			continue
		}
		set[id] = struct{}{}
		fresh = append(fresh, id)
	}
	return fresh
}

// untrack ends the in-flight mark of ids: they were acked in Redis, or left
// pending there for a later read or claim.
func (s *Subscriber) untrack(topic string, ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.inflight[topic]
	for _, id := range ids {
		delete(set, id)
	}
	if len(set) == 0 {
		delete(s.inflight, topic)
	}
}

// ackLoop sends the XACKs, one per read, one at a time, so acks use one
// connection however many subscriptions there are.
func (s *Subscriber) ackLoop() {
	defer close(s.ackerDone)
	for req := range s.acks {
		s.xack(req)
		s.untrack(req.topic, req.ids)
	}
}

// xack acknowledges one read's acked entries, retrying with backoff until
// Redis answers. Once Close was called it tries once more only: an entry
// left unacked is delivered again later, which at-least-once allows.
func (s *Subscriber) xack(req ackRequest) {
	backoff := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
		err := s.cfg.Client.XAck(ctx, req.topic, s.cfg.ConsumerGroup, req.ids...).Err()
		cancel()
		if err == nil {
			if s.cfg.Hooks.Acked != nil {
				s.cfg.Hooks.Acked(req.topic, len(req.ids))
			}
			return
		}
		select {
		case <-s.closing:
			s.cfg.Logger.Warn("redisbatch: XACK failed while closing; the entries stay pending",
				"topic", req.topic, "entries", len(req.ids), "err", err)
			return
		default:
		}
		s.cfg.Logger.Warn("redisbatch: XACK failed; retrying", "topic", req.topic, "entries", len(req.ids), "err", err, "in", backoff)
		select {
		case <-s.closing:
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.RetryMaxInterval)
	}
}
