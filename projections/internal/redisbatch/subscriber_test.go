package redisbatch_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/projections/internal/redisbatch"
)

const group = "g"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startRedis starts a private redis-server and returns its address and an
// admin client for the test's own commands.
func startRedis(t *testing.T) (string, *redis.Client) {
	t.Helper()
	srv := localstacktest.Redis(t, func(c *localstack.RedisConfig) { c.AppendFsync = "everysec" })
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), ClientName: "admin"})
	t.Cleanup(func() { _ = admin.Close() })
	return srv.Addr(), admin
}

// subClient returns a client named "sub", so CLIENT LIST can tell its
// connections apart, closed when the test ends.
func subClient(t *testing.T, addr string, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ClientName: "sub", PoolSize: 100})
	for _, h := range hooks {
		c.AddHook(h)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newSubscriber(t *testing.T, cfg redisbatch.SubscriberConfig) *redisbatch.Subscriber {
	t.Helper()
	if cfg.ConsumerGroup == "" {
		cfg.ConsumerGroup = group
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "c1"
	}
	cfg.Logger = quiet
	sub, err := redisbatch.NewSubscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// xadd appends n entries {"n": i} to stream and returns their ids.
func xadd(t *testing.T, c *redis.Client, stream string, n int) []string {
	t.Helper()
	ctx := context.Background()
	cmds := make([]*redis.StringCmd, n)
	pipe := c.Pipeline()
	for i := range n {
		cmds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"n": i}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, cmd := range cmds {
		ids[i] = cmd.Val()
	}
	return ids
}

// rawUnmarshaller puts an entry's fields into metadata, as the projector's
// does; it never fails.
type rawUnmarshaller struct{}

func (rawUnmarshaller) Unmarshal(values map[string]any) (*message.Message, error) {
	msg := message.NewMessage(fmt.Sprint(values["n"]), nil)
	for k, v := range values {
		msg.Metadata.Set(k, fmt.Sprint(v))
	}
	return msg, nil
}

func receive(t *testing.T, msgs <-chan *message.Message, within time.Duration) *message.Message {
	t.Helper()
	select {
	case msg, ok := <-msgs:
		if !ok {
			t.Fatal("messages channel closed")
		}
		return msg
	case <-time.After(within):
		t.Fatalf("no message within %s", within)
		return nil
	}
}

func pendingCount(t *testing.T, c *redis.Client, stream string) int64 {
	t.Helper()
	p, err := c.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// xackCounter is a go-redis hook that records the number of ids of every
// XACK command.
type xackCounter struct {
	mu   sync.Mutex
	acks []int
}

func (*xackCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*xackCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *xackCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xack" {
			h.mu.Lock()
			h.acks = append(h.acks, len(cmd.Args())-3) // xack stream group id...
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *xackCounter) snapshot() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.acks...)
}

func TestOneMultiIDXAckPerRead(t *testing.T) {
	addr, admin := startRedis(t)
	xadd(t, admin, "s", 250)
	counter := &xackCounter{}
	var reads []int
	var mu sync.Mutex
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:       subClient(t, addr, counter),
		Unmarshaller: rawUnmarshaller{},
		ReadCount:    100,
		Hooks: redisbatch.Hooks{Read: func(_, source string, n int) {
			mu.Lock()
			defer mu.Unlock()
			reads = append(reads, n)
		}},
	})
	msgs, err := sub.Subscribe(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	for range 250 {
		receive(t, msgs, 5*time.Second).Ack()
	}
	localstacktest.WaitFor(t, "every entry acked", 5*time.Second, func() bool { return pendingCount(t, admin, "s") == 0 })
	mu.Lock()
	defer mu.Unlock()
	// Two reads may be in flight at once, so their XACKs may come in either
	// order: compare the sizes, not the sequence.
	got := slices.Sorted(slices.Values(counter.snapshot()))
	if fmt.Sprint(got) != "[50 100 100]" || fmt.Sprint(reads) != "[100 100 50]" {
		t.Fatalf("reads of %v entries were acked by XACKs of %v ids; want one XACK per read", reads, got)
	}
}

func TestNackedMessageIsResentAfterTheDelayWithoutHoldingTheOthers(t *testing.T) {
	addr, admin := startRedis(t)
	ids := xadd(t, admin, "s", 3)
	counter := &xackCounter{}
	const delay = 300 * time.Millisecond
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:          subClient(t, addr, counter),
		Unmarshaller:    rawUnmarshaller{},
		NackResendDelay: delay,
	})
	msgs, err := sub.Subscribe(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	first := receive(t, msgs, 5*time.Second)
	second := receive(t, msgs, time.Second)
	nackedAt := time.Now()
	second.Nack()
	// The third message of the read comes while the first is still unacked
	// and before the nacked one is resent.
	third := receive(t, msgs, delay/2)
	if got := third.Metadata.Get(redisbatch.DefaultStreamIDKey); got != ids[2] {
		t.Fatalf("third message has stream id %q, want %q", got, ids[2])
	}
	third.Ack()
	first.Ack()
	again := receive(t, msgs, 5*time.Second)
	if waited := time.Since(nackedAt); waited < delay {
		t.Fatalf("nacked message resent after %s, before the %s delay", waited, delay)
	}
	if again.Metadata.Get(redisbatch.DefaultStreamIDKey) != ids[1] || again.UUID != second.UUID {
		t.Fatalf("resent message %s (%s), want the nacked one %s (%s)",
			again.UUID, again.Metadata.Get(redisbatch.DefaultStreamIDKey), second.UUID, ids[1])
	}
	if got := counter.snapshot(); len(got) != 0 {
		t.Fatalf("XACK sent before every message of the read was acked: %v", got)
	}
	again.Ack()
	localstacktest.WaitFor(t, "the read acked", 5*time.Second, func() bool { return pendingCount(t, admin, "s") == 0 })
	if got := counter.snapshot(); fmt.Sprint(got) != "[3]" {
		t.Fatalf("XACKs of %v ids, want one of 3", got)
	}
}

func TestClaimsTheIdlePendingEntriesOfADeadConsumer(t *testing.T) {
	addr, admin := startRedis(t)
	ctx := context.Background()
	if err := admin.XGroupCreateMkStream(ctx, "s", group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	xadd(t, admin, "s", 250)
	// A consumer reads every entry and dies without acking any.
	if err := admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "dead", Streams: []string{"s", ">"}, Count: 1000}).Err(); err != nil {
		t.Fatal(err)
	}
	var claimed atomic.Int64
	var claims atomic.Int64
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:        subClient(t, addr),
		Unmarshaller:  rawUnmarshaller{},
		Consumer:      "alive",
		ClaimInterval: 100 * time.Millisecond,
		ClaimMinIdle:  300 * time.Millisecond,
		ClaimCount:    100,
		Hooks: redisbatch.Hooks{Read: func(_, source string, n int) {
			if source == redisbatch.SourceClaimed {
				claims.Add(1)
				claimed.Add(int64(n))
			}
		}},
	})
	msgs, err := sub.Subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 250 {
		msg := receive(t, msgs, 5*time.Second)
		seen[msg.Metadata.Get(redisbatch.DefaultStreamIDKey)] = true
		msg.Ack()
	}
	localstacktest.WaitFor(t, "every claimed entry acked", 5*time.Second, func() bool { return pendingCount(t, admin, "s") == 0 })
	if claimed.Load() != 250 || claims.Load() < 3 {
		t.Fatalf("claimed %d entries in %d XAUTOCLAIMs, want 250 in batches of at most 100", claimed.Load(), claims.Load())
	}
}

func TestTakesBackItsOwnPendingEntriesAtStart(t *testing.T) {
	addr, admin := startRedis(t)
	ctx := context.Background()
	if err := admin.XGroupCreateMkStream(ctx, "s", group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	ids := xadd(t, admin, "s", 5)
	// A previous run of this consumer read the entries and crashed.
	if err := admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c1", Streams: []string{"s", ">"}, Count: 3}).Err(); err != nil {
		t.Fatal(err)
	}
	var sources []string
	var mu sync.Mutex
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:       subClient(t, addr),
		Unmarshaller: rawUnmarshaller{},
		Consumer:     "c1",
		ClaimMinIdle: time.Hour, // not claimed: taken back as this consumer's own
		Hooks: redisbatch.Hooks{Read: func(_, source string, n int) {
			mu.Lock()
			defer mu.Unlock()
			sources = append(sources, fmt.Sprintf("%s:%d", source, n))
		}},
	})
	msgs, err := sub.Subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		msg := receive(t, msgs, 2*time.Second)
		if got := msg.Metadata.Get(redisbatch.DefaultStreamIDKey); got != ids[i] {
			t.Fatalf("message %d has stream id %s, want %s", i, got, ids[i])
		}
		msg.Ack()
	}
	localstacktest.WaitFor(t, "every entry acked", 5*time.Second, func() bool { return pendingCount(t, admin, "s") == 0 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(sources) != "[pending:3 new:2]" {
		t.Fatalf("reads %v, want the 3 own pending entries first, then the 2 new", sources)
	}
}

// blockedReads counts the connections of the "sub" client blocked in
// XREADGROUP.
func subConnections(t *testing.T, admin *redis.Client) (total, blocked int) {
	t.Helper()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if !strings.Contains(line, " name=sub ") {
			continue
		}
		total++
		if strings.Contains(line, " cmd=xreadgroup") && strings.Contains(line, " flags=b") {
			blocked++
		}
	}
	return total, blocked
}

func TestCloseReturnsPromptlyWhileReadsAreBlocked(t *testing.T) {
	addr, admin := startRedis(t)
	sub := newSubscriber(t, redisbatch.SubscriberConfig{Client: subClient(t, addr), BlockTime: time.Second})
	var outs []<-chan *message.Message
	for i := range 4 {
		msgs, err := sub.Subscribe(context.Background(), fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, msgs)
	}
	localstacktest.WaitFor(t, "4 blocked reads", 5*time.Second, func() bool { _, b := subConnections(t, admin); return b == 4 })
	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s while reads were blocked", took)
	}
	for _, out := range outs {
		select {
		case _, open := <-out:
			if open {
				t.Fatal("message after Close")
			}
		default:
			t.Fatal("output channel still open after Close")
		}
	}
	if _, b := subConnections(t, admin); b != 0 {
		t.Fatalf("%d reads still blocked after Close returned", b)
	}
	if _, err := sub.Subscribe(context.Background(), "s0"); err == nil {
		t.Fatal("Subscribe after Close succeeded")
	}
}

func TestCancelledContextEndsTheSubscriptionPromptly(t *testing.T) {
	addr, admin := startRedis(t)
	sub := newSubscriber(t, redisbatch.SubscriberConfig{Client: subClient(t, addr), BlockTime: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	msgs, err := sub.Subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	localstacktest.WaitFor(t, "a blocked read", 5*time.Second, func() bool { _, b := subConnections(t, admin); return b == 1 })
	start := time.Now()
	cancel()
	select {
	case _, open := <-msgs:
		if open {
			t.Fatal("message after cancel")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("subscription still open 2s after its context was cancelled")
	}
	t.Logf("subscription ended %s after cancel", time.Since(start))
}

func TestCloseWaitsForDeliveredMessagesToBeAcked(t *testing.T) {
	addr, admin := startRedis(t)
	xadd(t, admin, "s", 2)
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:       subClient(t, addr),
		Unmarshaller: rawUnmarshaller{},
		CloseTimeout: time.Second,
	})
	msgs, err := sub.Subscribe(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	slow := receive(t, msgs, 2*time.Second)
	never := receive(t, msgs, 2*time.Second)
	go func() {
		time.Sleep(300 * time.Millisecond)
		slow.Ack()
	}()
	start := time.Now()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < 900*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Close took %s, want about its 1s CloseTimeout", took)
	}
	select {
	case <-never.Context().Done():
	default:
		t.Fatal("the context of a message never acked is not done after Close")
	}
	// The acked message was acked in Redis; the other stays pending.
	if n := pendingCount(t, admin, "s"); n != 1 {
		t.Fatalf("%d entries pending after Close, want 1 (the message never acked)", n)
	}
}

// TestConnectionsStayFew subscribes to 16 partition streams, as the
// projector does, and counts the client's connections with CLIENT LIST
// while idle and after a burst of traffic.
func TestConnectionsStayFew(t *testing.T) {
	addr, admin := startRedis(t)
	const streams = 16
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:        subClient(t, addr),
		Unmarshaller:  rawUnmarshaller{},
		BlockTime:     100 * time.Millisecond,
		ClaimInterval: 50 * time.Millisecond,
		ClaimMinIdle:  time.Second,
	})
	var wg sync.WaitGroup
	for i := range streams {
		msgs, err := sub.Subscribe(context.Background(), fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for msg := range msgs {
				msg.Ack()
			}
		})
	}
	for i := range streams {
		xadd(t, admin, fmt.Sprintf("s%d", i), 500)
	}
	localstacktest.WaitFor(t, "every entry acked", 10*time.Second, func() bool {
		for i := range streams {
			if pendingCount(t, admin, fmt.Sprintf("s%d", i)) != 0 {
				return false
			}
		}
		info, err := admin.XInfoGroups(context.Background(), "s0").Result()
		return err == nil && len(info) == 1 && info[0].EntriesRead == 500
	})
	time.Sleep(300 * time.Millisecond) // a few idle reads and claims
	total, _ := subConnections(t, admin)
	t.Logf("%d connections for %d subscriptions", total, streams)
	// One per subscription (reads and claims) and one for acks; Subscribe
	// may have run concurrently with another subscription's first read.
	if total > streams+2 {
		t.Fatalf("%d connections for %d subscriptions, want at most %d", total, streams, streams+2)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func TestDeletedPendingEntriesAreAckedWithoutDelivery(t *testing.T) {
	addr, admin := startRedis(t)
	ctx := context.Background()
	if err := admin.XGroupCreateMkStream(ctx, "s", group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	ids := xadd(t, admin, "s", 3)
	if err := admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: "c1", Streams: []string{"s", ">"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.XDel(ctx, "s", ids[1]).Err(); err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t, redisbatch.SubscriberConfig{Client: subClient(t, addr), Unmarshaller: rawUnmarshaller{}, Consumer: "c1"})
	msgs, err := sub.Subscribe(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{ids[0], ids[2]} {
		msg := receive(t, msgs, 2*time.Second)
		if got := msg.Metadata.Get(redisbatch.DefaultStreamIDKey); got != want {
			t.Fatalf("got entry %s, want %s", got, want)
		}
		msg.Ack()
	}
	localstacktest.WaitFor(t, "every entry acked", 5*time.Second, func() bool { return pendingCount(t, admin, "s") == 0 })
}

func TestConfigValidate(t *testing.T) {
	_, err := redisbatch.NewSubscriber(redisbatch.SubscriberConfig{ReadCount: -1, BlockTime: time.Minute})
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, want := range []string{"Client", "ConsumerGroup", "Consumer is", "ReadCount", "BlockTime"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// failingXAck is a go-redis hook that fails every XACK of one stream while
// down is set, as a Redis Cluster master that is down would.
type failingXAck struct {
	stream string
	down   atomic.Bool
	failed atomic.Int64
}

func (*failingXAck) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*failingXAck) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *failingXAck) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "xack" && cmd.Args()[1] == h.stream && h.down.Load() {
			h.failed.Add(1)
			err := fmt.Errorf("dial tcp: connect: connection refused")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestAFailingXAckHoldsNoOtherStream fails the XACKs of one stream: the
// other stream's entries are still acked at once, and the failing ones
// are acked once their stream answers again.
func TestAFailingXAckHoldsNoOtherStream(t *testing.T) {
	addr, admin := startRedis(t)
	hook := &failingXAck{stream: "down"}
	hook.down.Store(true)
	sub := newSubscriber(t, redisbatch.SubscriberConfig{
		Client:           subClient(t, addr, hook),
		Unmarshaller:     rawUnmarshaller{},
		RetryMaxInterval: 100 * time.Millisecond,
	})
	down, err := sub.Subscribe(context.Background(), "down")
	if err != nil {
		t.Fatal(err)
	}
	up, err := sub.Subscribe(context.Background(), "up")
	if err != nil {
		t.Fatal(err)
	}
	xadd(t, admin, "down", 1)
	receive(t, down, 5*time.Second).Ack()
	localstacktest.WaitFor(t, "a failed XACK on the stream that is down", 5*time.Second, func() bool { return hook.failed.Load() > 0 })
	xadd(t, admin, "up", 5)
	for range 5 {
		receive(t, up, 5*time.Second).Ack()
	}
	localstacktest.WaitFor(t, "the other stream's entries acked", 2*time.Second, func() bool { return pendingCount(t, admin, "up") == 0 })
	if n := pendingCount(t, admin, "down"); n != 1 {
		t.Fatalf("%d entries pending on the stream that is down, want 1", n)
	}
	hook.down.Store(false)
	localstacktest.WaitFor(t, "the parked XACK retried", 5*time.Second, func() bool { return pendingCount(t, admin, "down") == 0 })
}
