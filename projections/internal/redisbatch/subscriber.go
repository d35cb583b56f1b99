package redisbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// connection however many subscriptions there are. An XACK that fails (its
// stream's Redis Cluster master is down) is parked and retried with
// backoff, behind none of the others: a stream whose node is down must not
// hold the acks of the streams on the nodes that are up.
func (s *Subscriber) ackLoop() {
	defer close(s.ackerDone)
	var (
		parked  []ackRequest
		retry   <-chan time.Time
		backoff = 50 * time.Millisecond
		acks    = s.acks
	)
	for acks != nil || len(parked) > 0 {
		select {
		case req, ok := <-acks:
			if !ok {
				// Every subscription ended: one more try each, as Close promises.
				for _, req := range parked {
					s.finalAck(req, s.xack(req))
				}
				return
			}
			// A stream already parked waits its turn: its node is likely
			// still down, and each try may take a dial timeout.
			if slices.ContainsFunc(parked, func(p ackRequest) bool { return p.topic == req.topic }) {
				parked = append(parked, req)
				continue
			}
			err := s.xack(req)
			if err != nil && !s.isClosing() {
				if len(parked) == 0 {
					retry = s.warnParked(req, err, backoff)
				}
				parked = append(parked, req)
				continue
			}
			s.finalAck(req, err)
		case <-retry:
			still, down := parked[:0], map[string]bool{}
			var lastErr error
			for _, req := range parked {
				if down[req.topic] {
					still = append(still, req)
					continue
				}
				err := s.xack(req)
				if err != nil && !s.isClosing() {
					still, lastErr, down[req.topic] = append(still, req), err, true
					continue
				}
				s.finalAck(req, err)
			}
			parked, retry = still, nil
			if len(parked) > 0 {
				backoff = min(2*backoff, s.cfg.RetryMaxInterval)
				retry = s.warnParked(parked[0], lastErr, backoff)
			} else {
				backoff = 50 * time.Millisecond
			}
		}
	}
}

// warnParked logs a failed XACK and returns when to retry it.
func (s *Subscriber) warnParked(req ackRequest, err error, in time.Duration) <-chan time.Time {
	s.cfg.Logger.Warn("redisbatch: XACK failed; retrying", "topic", req.topic, "entries", len(req.ids), "err", err, "in", in)
	return time.After(in)
}

// finalAck ends req's in-flight mark after its XACK succeeded, or failed
// while closing: an entry left unacked is delivered again later, which
// at-least-once allows.
func (s *Subscriber) finalAck(req ackRequest, err error) {
	if err != nil {
		s.cfg.Logger.Warn("redisbatch: XACK failed while closing; the entries stay pending",
			"topic", req.topic, "entries", len(req.ids), "err", err)
	}
	s.untrack(req.topic, req.ids)
}

func (s *Subscriber) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// xack acknowledges one read's acked entries.
func (s *Subscriber) xack(req ackRequest) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CloseTimeout)
	defer cancel()
	err := s.cfg.Client.XAck(ctx, req.topic, s.cfg.ConsumerGroup, req.ids...).Err()
	if err == nil && s.cfg.Hooks.Acked != nil {
		s.cfg.Hooks.Acked(req.topic, len(req.ids))
	}
	return err
}
