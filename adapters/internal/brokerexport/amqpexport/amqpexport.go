// Package amqpexport publishes the broker export's messages to RabbitMQ
// (AMQP 0-9-1): to a durable topic exchange, with a routing key per SKU
// (<prefix>.<token>, see brokerexport.Token), persistent, mandatory and
// confirmed.
//
// It publishes with amqp091-go, not Watermill's AMQP publisher, which
// sets the message id only through a post-processing hook and does not
// treat a returned message as a failure: here a message that no queue
// takes comes back (mandatory) and fails the publish instead of being
// confirmed silently. A batch is a window of up to Window messages
// published on one confirm-mode channel without waiting between them;
// each SKU's cursor then moves to its last message before the first one
// not confirmed. AMQP has no server-side de-duplication: consumers drop
// repeats by message-id (the event id); a kill -9, or a window that
// failed in its middle, repeats at most one window per SKU.
package amqpexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
)

// DefaultExchange is Config.Exchange's default.
const DefaultExchange = "invledger.events"

// Config configures a Publisher.
type Config struct {
	// URL is the broker, amqp[s]://user:password@host:port/vhost. Required.
	URL string
	// Exchange is the topic exchange, declared durable if missing.
	// Default DefaultExchange.
	Exchange string
	// Prefix prefixes every routing key. Default brokerexport.DefaultPrefix.
	Prefix string
	// Timeout bounds a connect and a publish's confirmation. Default 5 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Exchange == "" {
		c.Exchange = DefaultExchange
	}
	if c.Prefix == "" {
		c.Prefix = brokerexport.DefaultPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid setting at once, naming them.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL, Err: errors.New("is required")})
	}
	if err := brokerexport.CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("amqp export: Timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Publisher publishes to RabbitMQ. It implements brokerexport.Publisher.
type Publisher struct {
	cfg Config

	mu   sync.Mutex
	conn *amqp.Connection
	idle []*channel // of conn
	// blocked is why the broker blocks publishing, "" when it does not.
	blocked atomic.Pointer[string]
}

var _ brokerexport.Publisher = (*Publisher)(nil)

// channel is a channel in confirm mode with its returns.
type channel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
}

// New validates cfg and returns a Publisher; it connects on Connect.
func New(cfg Config) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg}, nil
}

// Broker is "amqp".
func (p *Publisher) Broker() string { return "amqp" }

// RoutingKey is the routing key of sku's messages.
func (p *Publisher) RoutingKey(sku string) string {
	return p.cfg.Prefix + "." + brokerexport.Token(sku)
}

// Connect connects, unless connected, and declares the exchange.
func (p *Publisher) Connect(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil && !p.conn.IsClosed() {
		return nil
	}
	p.idle = nil
	p.blocked.Store(new(string))
	conn, err := amqp.DialConfig(p.cfg.URL, amqp.Config{Dial: amqp.DefaultDial(p.cfg.Timeout), Heartbeat: 5 * time.Second,
		Properties: amqp.Table{"connection_name": "invledger export"}})
	if err != nil {
		return &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL, Err: brokerexport.RedactedError(err, p.cfg.URL)}
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(p.cfg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.CloseDeadline(time.Now().Add(p.cfg.Timeout))
		return &brokerexport.SettingError{Setting: brokerexport.SettingAMQPExchange, Err: fmt.Errorf("declare topic exchange %q: %w", p.cfg.Exchange, err)}
	}
	_ = ch.Close()
	blocking := conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	go func() {
		for b := range blocking {
			reason := ""
			if b.Active {
				reason = b.Reason
			}
			p.blocked.Store(&reason)
			if b.Active {
				p.cfg.Logger.Warn("amqp export: the broker blocks publishing", "reason", b.Reason)
			}
		}
	}()
	p.conn = conn
	return nil
}

// get takes an idle channel, or opens one. A broker that blocks the
// connection (an alarm) answers no channel open: after Timeout the
// connection is abandoned, to be dialled again.
func (p *Publisher) get() (*channel, error) {
	p.mu.Lock()
	conn := p.conn
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		return nil, &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL, Err: errors.New("not connected to the broker")}
	}
	type opened struct {
		c   *channel
		err error
	}
	done := make(chan opened, 1)
	go func() {
		ch, err := conn.Channel()
		if err == nil {
			if err = ch.Confirm(false); err != nil {
				_ = ch.Close()
			}
		}
		if err != nil {
			done <- opened{err: fmt.Errorf("amqp export: open a channel in confirm mode: %w", err)}
			return
		}
		done <- opened{c: &channel{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, Window))}}
	}()
	select {
	case o := <-done:
		return o.c, o.err
	case <-time.After(p.cfg.Timeout):
		p.abandon(conn)
		return nil, p.stalled()
	}
}

// put gives c back, or closes it after a failure: its state (a
// confirmation or a return still to come) is then unknown.
func (p *Publisher) put(c *channel, failed bool) {
	if failed {
		go func() { _ = c.ch.Close() }() // a blocked connection answers no close
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, c)
}

// abandon drops conn, which stopped answering, so the next Connect dials again.
func (p *Publisher) abandon(conn *amqp.Connection) {
	p.mu.Lock()
	if p.conn == conn {
		p.conn, p.idle = nil, nil
	}
	p.mu.Unlock()
	go func() { _ = conn.CloseDeadline(time.Now().Add(time.Second)) }()
}

// stalled explains a broker that answered nothing within Timeout.
func (p *Publisher) stalled() error {
	if r := p.blocked.Load(); r != nil && *r != "" {
		return &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL,
			Err: fmt.Errorf("the broker blocks publishing (%s): free its disk or memory", *r)}
	}
	return fmt.Errorf("amqp export: the broker answered nothing within %s", p.cfg.Timeout)
}

// Window is the most messages published on a channel before their
// confirmations are awaited.
const Window = 1000

// Path is "window": each batch is published on a confirm-mode channel of
// its own without waiting between messages, then its confirmations are
// awaited.
func (p *Publisher) Path() string { return "window" }

// Limits: a batch is one window, of one SKU or many.
func (p *Publisher) Limits() brokerexport.Limits {
	return brokerexport.Limits{Events: Window, PerSKU: Window}
}

// Publish publishes runs as one window and advances each to its last
// message before the first one not confirmed: nacked, returned (no queue
// took it) or not answered within Timeout. A message confirmed after one
// that failed is published again with it, so the consumer's
// de-duplication by message-id drops at most a window's repeats.
func (p *Publisher) Publish(ctx context.Context, runs []brokerexport.Run) []brokerexport.Outcome {
	out := make([]brokerexport.Outcome, len(runs))
	var msgs []brokerexport.Message
	for i, r := range runs {
		out[i].UpTo = r.After
		msgs = append(msgs, r.Msgs...)
	}
	fails, err := p.window(ctx, msgs)
	k := 0
	for i, r := range runs {
		for _, m := range r.Msgs {
			if out[i].Err == nil {
				if out[i].Err = fails[k]; out[i].Err == nil {
					out[i].UpTo = m.Seq
				}
			}
			k++
		}
	}
	if err != nil {
		for i := range out {
			if out[i].Err == nil && out[i].UpTo < runs[i].Msgs[len(runs[i].Msgs)-1].Seq {
				out[i].Err = err
			}
		}
	}
	return out
}

// HeldBeyondLedger: an exchange keeps nothing to read back, so Publish
// never answers past the messages it was given; the error is a bug's.
func (p *Publisher) HeldBeyondLedger(sku string, seq int64) error {
	return fmt.Errorf("amqp export: confirmed %s up to seq %d, past the messages published", sku, seq)
}

// Replay publishes msgs again under their event ids, a window at a time.
func (p *Publisher) Replay(ctx context.Context, msgs []brokerexport.Message) error {
	for chunk := range slices.Chunk(msgs, Window) {
		fails, err := p.window(ctx, chunk)
		if err != nil {
			return err
		}
		for _, f := range fails {
			if f != nil {
				return f
			}
		}
	}
	return nil
}

// window publishes msgs on one channel without waiting, then awaits their
// confirmations: fails[i] is why msgs[i] is not confirmed, nil once it
// is; err is a failure of the channel that left some unanswered.
func (p *Publisher) window(ctx context.Context, msgs []brokerexport.Message) (fails []error, err error) {
	fails = make([]error, len(msgs))
	c, err := p.get()
	if err != nil {
		for i := range fails {
			fails[i] = err
		}
		return fails, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	confirms := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		confirms[i], err = c.ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.RoutingKey(m.SKU), true, false, amqp.Publishing{
			MessageId: m.EventID, ContentType: "application/json", DeliveryMode: amqp.Persistent, Timestamp: time.Now(),
			Headers: amqp.Table{brokerexport.HeaderSKU: m.SKU, brokerexport.HeaderSeq: m.Seq, brokerexport.HeaderSchema: brokerexport.Schema},
			Body:    m.Body})
		if err != nil {
			err = fmt.Errorf("amqp export: publish: %w", err)
			for j := i; j < len(msgs); j++ {
				fails[j] = err
			}
			confirms = confirms[:i]
			break
		}
	}
	for i, dc := range confirms {
		select {
		case <-dc.Done():
		case <-ctx.Done():
			p.abandon(c.conn)
			err = p.stalled()
			for j := i; j < len(confirms); j++ {
				fails[j] = err
			}
			return fails, err
		}
	}
	// The broker sends a message's return before its confirmation, and the
	// client hands the return over before it marks the confirmation done.
	returned := map[string]amqp.Return{}
	for more := true; more; {
		select {
		case r, open := <-c.returns:
			// A channel the broker closed closes its returns too.
			if more = open; open {
				returned[r.MessageId] = r
			}
		default:
			more = false
		}
	}
	failed := err != nil
	for i, dc := range confirms {
		if r, ok := returned[msgs[i].EventID]; ok {
			fails[i] = &brokerexport.SettingError{Setting: brokerexport.SettingAMQPExchange,
				Err: fmt.Errorf("no queue takes routing key %q on exchange %q: %d %s (bind a queue to %s.#)", r.RoutingKey, r.Exchange,
					r.ReplyCode, r.ReplyText, p.cfg.Prefix)}
		} else if !dc.Acked() {
			fails[i] = fmt.Errorf("amqp export: the broker refused message %s (nack)", msgs[i].EventID)
		}
		failed = failed || fails[i] != nil
	}
	p.put(c, failed)
	return fails, err
}

// Down reports a connection that is closed (the broker went away, or
// missed its heartbeats) or that the broker blocks.
func (p *Publisher) Down() error {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		return &brokerexport.SettingError{Setting: brokerexport.SettingAMQPURL, Err: errors.New("not connected to the broker")}
	}
	if r := p.blocked.Load(); r != nil && *r != "" {
		return p.stalled()
	}
	return nil
}

// Close disconnects.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.CloseDeadline(time.Now().Add(time.Second))
	}
	p.conn, p.idle = nil, nil
	return nil
}
