package redisbatch

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"
)

// subscription is one Subscribe call: one goroutine reads and delivers
// (run), and one goroutine per delivered message waits for its ack or nack
// (await).
type subscription struct {
	s     *Subscriber
	cfg   *SubscriberConfig
	topic string
	log   *slog.Logger
	out   chan *message.Message

	// runCtx, for Redis commands, is done once Close was called or the
	// subscription's context ended; stop is its Done channel.
	runCtx context.Context
	stop   <-chan struct{}
	halt   context.CancelFunc
	// msgCtx is the parent of every message's context: the subscription's
	// context until the wait for acks after stop is over.
	msgCtx     context.Context
	cancelMsgs context.CancelFunc
	// abandon is closed CloseTimeout after stop, unless run ended before:
	// messages not acked by then are left pending in Redis.
	abandon chan struct{}
	done    chan struct{} // closed when run ends

	slots chan struct{}  // one per read with unresolved messages
	wg    sync.WaitGroup // message goroutines
}

func newSubscription(ctx context.Context, s *Subscriber, topic string) *subscription {
	runCtx, halt := context.WithCancel(ctx)
	msgCtx, cancelMsgs := context.WithCancel(ctx)
	sub := &subscription{
		s:          s,
		cfg:        &s.cfg,
		topic:      topic,
		log:        s.cfg.Logger.With("topic", topic, "group", s.cfg.ConsumerGroup, "consumer", s.cfg.Consumer),
		out:        make(chan *message.Message),
		runCtx:     runCtx,
		stop:       runCtx.Done(),
		halt:       halt,
		msgCtx:     msgCtx,
		cancelMsgs: cancelMsgs,
		abandon:    make(chan struct{}),
		done:       make(chan struct{}),
		slots:      make(chan struct{}, s.cfg.MaxInFlightReads),
	}
	go func() {
		select {
		case <-s.closing:
			halt()
		case <-runCtx.Done():
		}
	}()
	// The wait for acks starts at stop, while the last read may still be
	// blocked, so Close takes the longer of the two, not their sum.
	context.AfterFunc(runCtx, func() {
		t := time.NewTimer(s.cfg.CloseTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			close(sub.abandon)
		case <-sub.done:
		}
	})
	return sub
}

// run reads and delivers until stop, then gives the delivered messages
// CloseTimeout to be acked, and closes out.
func (sub *subscription) run() {
	defer sub.s.subs.Done()
	defer close(sub.out)
	sub.readLoop()
	sub.wg.Wait()
	close(sub.done)
	sub.cancelMsgs()
	sub.halt()
}

// readLoop first re-reads this consumer's own pending entries, then reads
// new ones, and every ClaimInterval claims a round of idle ones. After any
// failed read it re-reads its own pending entries first.
func (sub *subscription) readLoop() {
	pendingFrom := "0" // "" once the own pending list has been read through
	claimFrom := ""    // XAUTOCLAIM cursor; "" between claim rounds
	nextClaim := time.Now()
	backoff := 50 * time.Millisecond
	for {
		select {
		case sub.slots <- struct{}{}:
		case <-sub.stop:
			return
		}
		var (
			msgs   []redis.XMessage
			source string
			err    error
		)
		switch {
		case pendingFrom != "":
			source = SourcePending
			msgs, err = sub.read(pendingFrom, -1)
			if err == nil {
				pendingFrom = ""
				if len(msgs) > 0 {
					pendingFrom = msgs[len(msgs)-1].ID
				}
			}
		case claimFrom != "" || !time.Now().Before(nextClaim):
			source = SourceClaimed
			if claimFrom == "" {
				claimFrom = "0-0"
			}
			msgs, claimFrom, err = sub.claim(claimFrom)
			if err != nil || claimFrom == "0-0" {
				claimFrom = ""
				nextClaim = time.Now().Add(sub.cfg.ClaimInterval)
			}
		default:
			source = SourceNew
			msgs, err = sub.read(">", sub.cfg.BlockTime)
		}
		if err != nil {
			<-sub.slots
			if sub.runCtx.Err() != nil {
				return
			}
			sub.log.Warn("redisbatch: read failed; retrying", "source", source, "err", err, "in", backoff)
			// A read that failed, a Redis that crashed or a connection lost,
			// may have been delivered without its reply reaching us: its
			// entries are in this consumer's pending list, and only a read
			// of that list gets them back before they idle long enough to be
			// claimed. Entries still being handled are not delivered twice.
			pendingFrom = "0"
			if strings.HasPrefix(err.Error(), "NOGROUP") {
				// The stream or the group is gone (a Redis that lost its
				// data, or a deleted key): make them again, as Subscribe did.
				if err := sub.s.createGroup(sub.runCtx, sub.topic); err != nil {
					sub.log.Warn("redisbatch: recreate group failed", "err", err)
				}
			}
			select {
			case <-sub.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, sub.cfg.RetryMaxInterval)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(msgs) == 0 {
			<-sub.slots
			continue
		}
		if sub.cfg.Hooks.Read != nil {
			sub.cfg.Hooks.Read(sub.topic, source, len(msgs))
		}
		sub.deliver(msgs, source)
	}
}

// read runs XREADGROUP from id: ">" for new entries, blocking up to block,
// or an id for this consumer's pending entries after it (block < 0: no
// BLOCK).
func (sub *subscription) read(id string, block time.Duration) ([]redis.XMessage, error) {
	streams, err := sub.cfg.Client.XReadGroup(sub.runCtx, &redis.XReadGroupArgs{
		Group:    sub.cfg.ConsumerGroup,
		Consumer: sub.cfg.Consumer,
		Streams:  []string{sub.topic, id},
		Count:    sub.cfg.ReadCount,
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil || len(streams) == 0 {
		return nil, err
	}
	return streams[0].Messages, nil
}

// claim runs one XAUTOCLAIM from cursor and returns the claimed entries and
// the next cursor ("0-0" once the pending list was scanned through).
func (sub *subscription) claim(cursor string) ([]redis.XMessage, string, error) {
	return sub.cfg.Client.XAutoClaim(sub.runCtx, &redis.XAutoClaimArgs{
		Stream:   sub.topic,
		Group:    sub.cfg.ConsumerGroup,
		Consumer: sub.cfg.Consumer,
		MinIdle:  sub.cfg.ClaimMinIdle,
		Start:    cursor,
		Count:    sub.cfg.ClaimCount,
	}).Result()
}

// batch is what one read delivered: once every entry is resolved (acked,
// or left pending), the acked ones get one XACK and the read's slot is
// freed.
type batch struct {
	sub       *subscription
	mu        sync.Mutex
	remaining int
	acked     []string
	left      []string
}

func (b *batch) resolve(id string, acked bool) {
	b.mu.Lock()
	if acked {
		b.acked = append(b.acked, id)
	} else {
		b.left = append(b.left, id)
	}
	b.remaining--
	done := b.remaining == 0
	b.mu.Unlock()
	if done {
		b.finish()
	}
}

func (b *batch) finish() {
	sub := b.sub
	if len(b.left) > 0 {
		sub.s.untrack(sub.topic, b.left)
	}
	if len(b.acked) > 0 {
		sub.s.acks <- ackRequest{topic: sub.topic, ids: b.acked}
	}
	<-sub.slots
}

// deliver hands the messages of one read to out, in stream order, and
// starts a goroutine per message to wait for its ack. Entries already in
// flight here are skipped; entries deleted from the stream since they were
// delivered (no fields) are acked without delivery. Every delivered
// message's context carries the Read it came with (see ReadOf).
func (sub *subscription) deliver(xms []redis.XMessage, source string) {
	ids := make([]string, len(xms))
	for i, xm := range xms {
		ids[i] = xm.ID
	}
	fresh := sub.s.track(sub.topic, ids)
	b := &batch{sub: sub, remaining: len(fresh)}
	if len(fresh) == 0 {
		b.finish()
		return
	}
	isFresh := make(map[string]bool, len(fresh))
	for _, id := range fresh {
		isFresh[id] = true
	}
	type delivery struct {
		id  string
		msg *message.Message
	}
	var todo []delivery
	for _, xm := range xms {
		if !isFresh[xm.ID] {
			continue
		}
		if xm.Values == nil {
			b.resolve(xm.ID, true)
			continue
		}
		msg, err := sub.cfg.Unmarshaller.Unmarshal(xm.Values)
		if err != nil {
			sub.log.Error("redisbatch: cannot unmarshal a stream entry; it stays pending", "stream_id", xm.ID, "err", err)
			b.resolve(xm.ID, false)
			continue
		}
		if msg.Metadata == nil {
			msg.Metadata = message.Metadata{}
		}
		msg.Metadata.Set(sub.cfg.StreamIDKey, xm.ID)
		todo = append(todo, delivery{xm.ID, msg})
	}
	read := &Read{Topic: sub.topic, Source: source, Size: len(todo)}
	readCtx := context.WithValue(sub.msgCtx, readKey{}, read)
	for i, d := range todo {
		cancel := sub.bind(d.msg, readCtx)
		if !sub.send(d.msg) {
			cancel()
			for _, rest := range todo[i:] {
				b.resolve(rest.id, false)
			}
			return
		}
		sub.wg.Add(1)
		go sub.await(b, d.id, d.msg, cancel)
	}
}

// bind gives msg a fresh context under parent (the subscription's message
// context, or a read's, which carries the Read), done when cancel is called
// or the subscription's messages are cancelled.
func (sub *subscription) bind(msg *message.Message, parent context.Context) context.CancelFunc {
	ctx, cancel := context.WithCancel(parent)
	msg.SetContext(ctx)
	return cancel
}

// send delivers msg unless the subscription stops first.
func (sub *subscription) send(msg *message.Message) bool {
	select {
	case sub.out <- msg:
		return true
	case <-sub.stop:
		return false
	}
}

// await waits for msg's ack; on a nack it sends a copy again after
// NackResendDelay, unless the subscription stopped.
func (sub *subscription) await(b *batch, id string, msg *message.Message, cancel context.CancelFunc) {
	defer sub.wg.Done()
	for {
		select {
		case <-msg.Acked():
			cancel()
			b.resolve(id, true)
			return
		case <-sub.abandon:
			cancel()
			b.resolve(id, false)
			return
		case <-msg.Nacked():
			cancel()
		}
		if !sub.sleep(sub.cfg.NackResendDelay) {
			b.resolve(id, false)
			return
		}
		// A message sent again travels alone: it is no longer part of the
		// read that first delivered it.
		msg = msg.Copy()
		cancel = sub.bind(msg, sub.msgCtx)
		if !sub.send(msg) {
			cancel()
			b.resolve(id, false)
			return
		}
	}
}

// sleep waits d unless the subscription stops first.
func (sub *subscription) sleep(d time.Duration) bool {
	if d <= 0 {
		return sub.runCtx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-sub.stop:
		return false
	}
}
