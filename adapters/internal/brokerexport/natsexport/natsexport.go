// Package natsexport publishes the broker export's messages to NATS
// JetStream, a subject per SKU (<prefix>.<token>, see brokerexport.Token)
// in one stream.
//
// It publishes with nats.go's jetstream API (and orbit.go's jetstreamext
// for atomic batches), not Watermill's JetStream publisher, which discards
// the publish acknowledgement: each message carries the event id as
// Nats-Msg-Id, and each SKU's next message expects the subject's last
// stream sequence (Nats-Expected-Last-Subject-Sequence), so the server
// refuses a publish out of order instead of storing it. Before a SKU's
// first publish, and after any failure, it reads the subject's last
// message, whose Invledger-Seq says how far the stream holds the SKU: a
// kill -9 between the broker's acknowledgement and the cursor's write
// stores nothing twice, even once the de-duplication window has passed.
//
// A batch goes out on one of three paths (Publisher.Path, choosePath): the
// predicted-sequence pipeline (pipeline.go) on a stream of one replica,
// atomic batches (batch.go) on a replicated stream that takes them, one
// publish at a time per SKU otherwise.
package natsexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
)

// Defaults of Config.
const (
	DefaultStream = "INVLEDGER_EVENTS"
	// DefaultDuplicateWindow is the stream's de-duplication window when
	// the export creates it: long enough to cover a broker or exporter
	// outage of an hour, where JetStream's own default is 2 minutes.
	DefaultDuplicateWindow = time.Hour
)

// Config configures a Publisher.
type Config struct {
	// URL is the NATS server, nats://[user:password@]host:port. Required.
	URL string
	// Stream is the JetStream stream. Default DefaultStream.
	Stream string
	// Prefix prefixes every subject. Default brokerexport.DefaultPrefix.
	Prefix string
	// CheckStreamOnly refuses to create a missing stream: the operator
	// creates it, with the retention and replicas they want.
	CheckStreamOnly bool
	// DuplicateWindow is the window of a stream the export creates.
	// Default DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// Timeout bounds a connect, a publish and a read of the stream. Default 5 s.
	Timeout time.Duration
	// Path, if set, is how batches are published when the server and the
	// stream allow it: "atomic_batch", "pipeline" or "per_sku" (see
	// Publisher.Path). Unset, the stream decides.
	Path   string
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Prefix == "" {
		c.Prefix = brokerexport.DefaultPrefix
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
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
		errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: errors.New("is required")})
	}
	if err := brokerexport.CheckPrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.DuplicateWindow < time.Second {
		errs = append(errs, &brokerexport.SettingError{Setting: brokerexport.SettingNATSDuplicates, Err: errors.New("must be at least 1s")})
	}
	if c.Timeout <= 0 {
		errs = append(errs, errors.New("nats export: Timeout must be positive"))
	}
	if c.Path != "" && c.Path != pathAtomic && c.Path != pathPipeline && c.Path != pathPerSKU {
		errs = append(errs, fmt.Errorf("nats export: Path %q is none of %s, %s, %s", c.Path, pathAtomic, pathPipeline, pathPerSKU))
	}
	return errors.Join(errs...)
}

// state is what the stream holds of one SKU: up to ledgerSeq, the last
// one at stream sequence streamSeq (0: nothing).
type state struct {
	streamSeq uint64
	ledgerSeq int64
}

// Publisher publishes to JetStream. It implements brokerexport.Publisher.
type Publisher struct {
	cfg Config

	mu     sync.Mutex
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	known  map[string]state // by SKU
	// atomic: the server and the stream take atomic batches (Path).
	atomic bool
	// direct: the server and the stream answer a direct get of many
	// subjects' last messages in one request.
	direct bool
	// pipeline: the stream has one replica, or Config.Path asks for it (Path).
	pipeline bool

	// sendMu holds a pipelined batch's sending and acknowledgements;
	// streamLast is the stream's last sequence plus one after the last
	// pipelined batch, 0 when it must be read again.
	sendMu     sync.Mutex
	streamLast uint64
}

var _ brokerexport.Publisher = (*Publisher)(nil)

// New validates cfg and returns a Publisher; it connects on Connect.
func New(cfg Config) (*Publisher, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, known: map[string]state{}}, nil
}

// Broker is "nats".
func (p *Publisher) Broker() string { return "nats" }

// Subject is the subject of sku's messages.
func (p *Publisher) Subject(sku string) string { return p.cfg.Prefix + "." + brokerexport.Token(sku) }

// Connect connects and checks the stream, creating it unless
// CheckStreamOnly. The client reconnects by itself after a broker restart.
func (p *Publisher) Connect(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc == nil || p.nc.IsClosed() {
		nc, err := nats.Connect(p.cfg.URL, nats.Name("invledger export"), nats.Timeout(p.cfg.Timeout),
			nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
			// A server that stops answering (stopped, or its host gone
			// without closing the socket) is noticed within seconds, not
			// the client's default of minutes, even while nothing is published.
			nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					p.cfg.Logger.Warn("nats export: disconnected; reconnecting", "err", err)
				}
			}))
		if err != nil {
			return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: brokerexport.RedactedError(err, p.cfg.URL)}
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: err}
		}
		p.nc, p.js = nc, js
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && p.cfg.CheckStreamOnly:
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream,
			Err: fmt.Errorf("JetStream has no stream %q, and %s is false", p.cfg.Stream, brokerexport.SettingNATSCreateStream)}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = p.js.CreateStream(ctx, jetstream.StreamConfig{Name: p.cfg.Stream, Subjects: []string{p.cfg.Prefix + ".>"},
			Storage: jetstream.FileStorage, Duplicates: p.cfg.DuplicateWindow,
			Description: "invledger's ledger events, a subject per SKU",
			// What the batch path needs: a server before 2.12 ignores
			// allow_atomic, and one before 2.9 allow_direct.
			AllowAtomicPublish: atomicServer(p.nc.ConnectedServerVersion()), AllowDirect: true})
		if err != nil {
			return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream, Err: fmt.Errorf("create stream %q: %w", p.cfg.Stream, err)}
		}
		p.cfg.Logger.Info("nats export: created the stream", "stream", p.cfg.Stream, "subjects", p.cfg.Prefix+".>",
			"duplicate_window", p.cfg.DuplicateWindow)
	case err != nil:
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: fmt.Errorf("read stream %q: %w", p.cfg.Stream, err)}
	}
	info := s.CachedInfo()
	if !takes(info.Config.Subjects, p.cfg.Prefix) {
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream, Err: fmt.Errorf("stream %q takes subjects %v, not %s.> (%s)",
			p.cfg.Stream, info.Config.Subjects, p.cfg.Prefix, brokerexport.SettingPrefix)}
	}
	if info.Config.Duplicates < p.cfg.DuplicateWindow {
		p.cfg.Logger.Warn("nats export: the stream's de-duplication window is shorter than the one set; consumers must de-duplicate by event id beyond it",
			"stream", p.cfg.Stream, "window", info.Config.Duplicates, "setting", brokerexport.SettingNATSDuplicates)
	}
	if s, err = p.enableBatches(ctx, s); err != nil {
		return err
	}
	p.stream = s
	return nil
}

// enableBatches chooses the path (choosePath) by what the server and the
// stream echo back, since a server before 2.12 accepts allow_atomic and
// ignores it. On a current server, a stream the export manages (not
// CheckStreamOnly) is first updated to take atomic batches and direct
// gets; a replicated stream the operator created without them takes the
// per-SKU path, with a warning naming the option.
func (p *Publisher) enableBatches(ctx context.Context, s jetstream.Stream) (jetstream.Stream, error) {
	version := p.nc.ConnectedServerVersion()
	cfg := s.CachedInfo().Config
	if atomicServer(version) && (!cfg.AllowAtomicPublish || !cfg.AllowDirect) && !p.cfg.CheckStreamOnly && cfg.Mirror == nil && cfg.PersistMode != jetstream.AsyncPersistMode {
		cfg.AllowAtomicPublish, cfg.AllowDirect = true, true
		updated, err := p.js.UpdateStream(ctx, cfg)
		if err != nil {
			p.cfg.Logger.Warn("nats export: could not turn on atomic batches on the stream; choosing a path without them", "stream", p.cfg.Stream, "err", err)
		} else {
			s = updated
			p.cfg.Logger.Info("nats export: turned on allow_atomic and allow_direct on the stream", "stream", p.cfg.Stream)
		}
	}
	cfg = s.CachedInfo().Config
	canAtomic := atomicServer(version) && cfg.AllowAtomicPublish
	path, why := choosePath(p.cfg.Path, canAtomic, cfg.Replicas)
	level := slog.LevelInfo
	if path == pathPerSKU && atomicServer(version) {
		level, why = slog.LevelWarn, why+"; set allow_atomic and allow_direct on the stream for atomic batches"
	}
	p.cfg.Logger.Log(ctx, level, "nats export: publishing "+path+": "+why, "server", version, "stream", p.cfg.Stream,
		"replicas", cfg.Replicas, "allow_atomic", cfg.AllowAtomicPublish, "path", path)
	atomic, pipeline := path == pathAtomic, path == pathPipeline
	if p.atomic != atomic || p.pipeline != pipeline {
		p.known = map[string]state{}
	}
	// The last messages of many subjects in one direct get came with 2.11;
	// a server that takes atomic batches answers it.
	p.atomic, p.direct, p.pipeline, p.streamLast = atomic, cfg.AllowDirect && atomicServer(version), pipeline, 0
	return s, nil
}

// choosePath chooses how batches are published: want if it can run, else
// by the stream. A stream of one replica takes the predicted-sequence
// pipeline, which measured fastest on a hot SKU (see
// docs/benchmarks/2026-12-04-broker-export-batches.md); a replicated one,
// whose leader refuses a second conditional publish to a subject in
// flight, atomic batches where the server and stream take them, else one
// publish at a time per SKU.
func choosePath(want string, canAtomic bool, replicas int) (path, why string) {
	switch {
	case want == pathAtomic && canAtomic:
		return pathAtomic, "as set"
	case want == pathPipeline && replicas <= 1:
		return pathPipeline, "as set"
	case want == pathPerSKU:
		return pathPerSKU, "as set"
	case replicas <= 1:
		return pathPipeline, "a stream of one replica stores one connection's messages in the order sent"
	case canAtomic:
		return pathAtomic, "a replicated stream that takes atomic batches"
	}
	return pathPerSKU, "a replicated stream without atomic batches"
}

// atomicServer reports whether a server of version takes atomic batches
// that honour Nats-Msg-Id: 2.12.1 and later.
func atomicServer(version string) bool {
	var major, minor, patch int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return false
	}
	return major > 2 || major == 2 && (minor > 12 || minor == 12 && patch >= 1)
}

// takes reports whether subjects cover every subject under prefix.
func takes(subjects []string, prefix string) bool {
	for _, s := range subjects {
		if s == ">" || s == prefix+".>" || s == prefix+".*" {
			return true
		}
	}
	return false
}

func (p *Publisher) conn() (jetstream.JetStream, jetstream.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.js == nil || p.stream == nil {
		return nil, nil, errors.New("nats export: not connected")
	}
	return p.js, p.stream, nil
}

func (p *Publisher) get(sku string) (state, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.known[sku]
	return st, ok
}

func (p *Publisher) set(sku string, st state, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok {
		p.known[sku] = st
	} else {
		delete(p.known, sku)
	}
}

// Paths of Path.
const (
	pathAtomic   = "atomic_batch"
	pathPipeline = "pipeline"
	pathPerSKU   = "per_sku"
)

// Path is how batches are published, once connected: "pipeline" on a
// stream of one replica; on a replicated one, "atomic_batch" where the
// server (2.12.1 and later) and the stream take atomic batches, "per_sku"
// otherwise (see choosePath and Config.Path).
func (p *Publisher) Path() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.atomic:
		return pathAtomic
	case p.pipeline:
		return pathPipeline
	}
	return pathPerSKU
}

// maxAtomicBatch is the most messages a server takes in an atomic batch
// by default (max_batch_size).
const maxAtomicBatch = 1000

// Per-SKU path: perSKUBatch events of a SKU at most in a batch, and
// perSKUInFlight SKUs published at once in one.
const (
	perSKUBatch    = 256
	perSKUInFlight = 16
)

// Limits: an atomic batch holds up to 1,000 messages, a pipelined one
// 2,000, of one SKU or many; on the per-SKU path, a batch is the SKUs
// published at once.
func (p *Publisher) Limits() brokerexport.Limits {
	switch p.Path() {
	case pathAtomic:
		return brokerexport.Limits{Events: maxAtomicBatch, PerSKU: maxAtomicBatch}
	case pathPipeline:
		return brokerexport.Limits{Events: pipelineBatch, PerSKU: pipelineBatch}
	}
	return brokerexport.Limits{Events: perSKUInFlight * perSKUBatch, PerSKU: perSKUBatch}
}

// Publish publishes runs as one atomic or pipelined batch, or, on the
// per-SKU path, each run's messages one after another, perSKUInFlight
// runs at once.
func (p *Publisher) Publish(ctx context.Context, runs []brokerexport.Run) []brokerexport.Outcome {
	switch p.Path() {
	case pathAtomic:
		return p.publishBatch(ctx, runs)
	case pathPipeline:
		return p.publishPipeline(ctx, runs)
	}
	out := make([]brokerexport.Outcome, len(runs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, perSKUInFlight)
	for i, r := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = p.publishSKU(ctx, r)
		})
	}
	wg.Wait()
	return out
}

// publishSKU publishes r's messages one after another, each expecting
// the subject's last stream sequence the one before left, and skips what
// the stream already holds.
func (p *Publisher) publishSKU(ctx context.Context, r brokerexport.Run) brokerexport.Outcome {
	js, stream, err := p.conn()
	if err != nil {
		return brokerexport.Outcome{UpTo: r.After, Err: err}
	}
	subject := p.Subject(r.SKU)
	st, ok := p.get(r.SKU)
	if !ok {
		if st, err = p.last(ctx, stream, subject); err != nil {
			return brokerexport.Outcome{UpTo: r.After, Err: err}
		}
		p.set(r.SKU, st, true)
	}
	upTo := max(r.After, st.ledgerSeq)
	for _, m := range r.Msgs {
		if m.Seq <= st.ledgerSeq {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		ack, err := js.PublishMsg(pctx, p.msg(subject, m), jetstream.WithExpectLastSequencePerSubject(st.streamSeq))
		cancel()
		if err != nil {
			// What the stream holds is read again before the next publish:
			// this one may have been stored although its answer was lost.
			p.set(r.SKU, state{}, false)
			return brokerexport.Outcome{UpTo: upTo, Err: p.explain(err)}
		}
		if ack.Duplicate {
			// Stored before by a publish this process did not see answered
			// (another exporter's, for up to a leader poll): read the stream again.
			p.set(r.SKU, state{}, false)
			return brokerexport.Outcome{UpTo: upTo}
		}
		st = state{streamSeq: ack.Sequence, ledgerSeq: m.Seq}
		p.set(r.SKU, st, true)
		upTo = m.Seq
	}
	return brokerexport.Outcome{UpTo: upTo}
}

// HeldBeyondLedger: Publish reads the last sequence the stream holds for a
// SKU's subject, so it is the one to meet a stream left from another
// ledger.
func (p *Publisher) HeldBeyondLedger(sku string, seq int64) error {
	return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream, Err: fmt.Errorf("the stream holds %s up to seq %d, beyond the ledger's events: "+
		"it holds another ledger's messages (left from a database since restored or recreated); give the export a new stream or prefix, or purge it", sku, seq)}
}

// Replay publishes msgs with their event ids as Nats-Msg-Id and no order
// check: within the stream's de-duplication window the stream drops them.
func (p *Publisher) Replay(ctx context.Context, msgs []brokerexport.Message) error {
	js, _, err := p.conn()
	if err != nil {
		return err
	}
	for _, m := range msgs {
		pctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		_, err := js.PublishMsg(pctx, p.msg(p.Subject(m.SKU), m))
		cancel()
		if err != nil {
			return p.explain(err)
		}
		// A later publish of the SKU reads the stream again.
		p.set(m.SKU, state{}, false)
	}
	return nil
}

func (p *Publisher) msg(subject string, m brokerexport.Message) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Header.Set(jetstream.MsgIDHeader, m.EventID)
	msg.Header.Set(brokerexport.HeaderSKU, m.SKU)
	msg.Header.Set(brokerexport.HeaderSeq, brokerexport.SeqHeader(m.Seq))
	msg.Header.Set(brokerexport.HeaderSchema, brokerexport.Schema)
	msg.Header.Set("Content-Type", "application/json")
	msg.Data = m.Body
	return msg
}

// last reads what the stream holds of subject: its last message's seq.
func (p *Publisher) last(ctx context.Context, stream jetstream.Stream, subject string) (state, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	raw, err := stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return state{}, nil
	}
	if err != nil {
		return state{}, p.explain(fmt.Errorf("read the last message of %s: %w", subject, err))
	}
	return p.stateOf(raw)
}

// stateOf is what raw, the last message of its subject, says the stream
// holds of the subject's SKU.
func (p *Publisher) stateOf(raw *jetstream.RawStreamMsg) (state, error) {
	seq, err := strconv.ParseInt(raw.Header.Get(brokerexport.HeaderSeq), 10, 64)
	if err != nil || seq < 1 {
		return state{}, p.foreign(raw.Subject)
	}
	return state{streamSeq: raw.Sequence, ledgerSeq: seq}, nil
}

// foreign is the error for subject, whose last message is not one the
// export published.
func (p *Publisher) foreign(subject string) error {
	return &brokerexport.SettingError{Setting: brokerexport.SettingPrefix,
		Err: fmt.Errorf("%w: subject %s of stream %q holds a message without %s, not published by invledger; remove it, or give the export a prefix of its own",
			brokerexport.ErrConflict, subject, p.cfg.Stream, brokerexport.HeaderSeq)}
}

// explain names the setting that explains err, where one does.
func (p *Publisher) explain(err error) error {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrStreamNotFound):
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream,
			Err: fmt.Errorf("no JetStream stream %q answers for %s.>: %w", p.cfg.Stream, p.cfg.Prefix, err)}
	case errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence:
		return fmt.Errorf("stream %q refused a publish out of order (another exporter, or a message published by hand): %w", p.cfg.Stream, err)
	case errors.As(err, &apiErr):
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSStream,
			Err: fmt.Errorf("JetStream refused the publish to stream %q: %w", p.cfg.Stream, err)}
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrConnectionClosed):
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: err}
	}
	return fmt.Errorf("nats export: %w", err)
}

// Down reports a connection that is down or reconnecting.
func (p *Publisher) Down() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.nc == nil:
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: errors.New("not connected")}
	case !p.nc.IsConnected():
		return &brokerexport.SettingError{Setting: brokerexport.SettingNATSURL, Err: fmt.Errorf("the connection to the server is %s", strings.ToLower(p.nc.Status().String()))}
	}
	return nil
}

// Close disconnects.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nc != nil {
		p.nc.Close()
	}
	p.nc, p.js, p.stream, p.known, p.atomic, p.pipeline = nil, nil, nil, map[string]state{}, false, false
	return nil
}
