package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/adapters/internal/approot"
	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/amqpexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// amqpConsumer consumes the AMQP export from a queue bound to every
// routing key, as an order service would, keeping every arrival.
type amqpConsumer struct {
	mu       sync.Mutex
	arrivals []amqp.Delivery
}

func consumeAMQP(t *testing.T, url, queue string) *amqpConsumer {
	t.Helper()
	c := &amqpConsumer{}
	ctx, cancel := context.WithCancel(context.Background())
	subscribed := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		for ctx.Err() == nil {
			err := c.consume(ctx, url, queue, func() {
				if first {
					first = false
					subscribed <- nil
				}
			})
			if first {
				subscribed <- err
				return
			}
			time.Sleep(100 * time.Millisecond) // the broker restarts: subscribe again
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := <-subscribed; err != nil {
		t.Fatal(err)
	}
	return c
}

// consume subscribes to a durable queue, which keeps the broker's
// persistent messages across its restart, and acknowledges each arrival
// once kept: what the connection's loss leaves unacknowledged comes again.
func (c *amqpConsumer) consume(ctx context.Context, url, queue string, subscribed func()) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer func() { _ = conn.CloseDeadline(time.Now().Add(time.Second)) }()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare("invledger.events", amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(queue, brokerexport.DefaultPrefix+".#", "invledger.events", false, nil)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		deliveries, err = ch.Consume(queue, "test", false, false, false, false, nil)
	}
	if err != nil {
		return err
	}
	subscribed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("the broker closed the subscription")
			}
			c.mu.Lock()
			c.arrivals = append(c.arrivals, d)
			c.mu.Unlock()
			_ = d.Ack(false)
		}
	}
}

func (c *amqpConsumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]amqp.Delivery(nil), c.arrivals...)
}

// distinct is how many different messages arrived.
func (c *amqpConsumer) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := map[string]bool{}
	for _, d := range c.arrivals {
		ids[d.MessageId] = true
	}
	return len(ids)
}

func (c *amqpConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.arrivals)
}

// exportCursorSum is the sum of broker's cursors: how many events the
// export recorded as confirmed.
func exportCursorSum(t *testing.T, st *stacktest.Stack, broker string) int {
	t.Helper()
	var n int
	if err := st.Pool.QueryRow(context.Background(), `SELECT COALESCE(sum(seq), 0) FROM export_cursors WHERE broker = $1`, broker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBrokerExport runs the broker export over one private NATS server
// (the current one, which takes atomic batches; the per-SKU path of
// Debian's 2.9.10 has its exactly-once tests in natsexport) and one
// RabbitMQ node (whose start takes seconds): a sale with kills and
// broker faults, a replay, and the refusals.
func TestBrokerExport(t *testing.T) {
	localstacktest.SkipShort(t)
	rabbit, rabbitReady := brokertest.StartRabbitMQAsync(t, brokertest.RabbitMQConfig{})
	st := stacktest.New(t)
	n := brokertest.StartNATS(t, brokertest.NATSConfig{Current: true})
	st.RunProjector(t)
	rabbitReady()
	var skus []string
	t.Run("kill -9 twice, each broker restarted and frozen", func(t *testing.T) { skus = testExportSurvivesFaults(t, st, n, rabbit) })
	if t.Failed() {
		return
	}
	t.Run("replay", func(t *testing.T) { testReplay(t, st, n, rabbit, skus[0]) })
	t.Run("refusals", func(t *testing.T) { testAMQPRefusals(t, st, rabbit) })
	t.Run("a broker stopped while nothing waits", func(t *testing.T) {
		exp := runExporter(t, st, ExportConfig{AMQPURL: rabbit.URL()})
		status := func(failing bool) func() bool {
			return func() bool { s := exp.Status(); return s.LagEvents == 0 && (s.Err != nil) == failing }
		}
		localstacktest.WaitFor(t, "everything exported", 30*time.Second, status(false))
		rabbit.Kill()
		localstacktest.WaitFor(t, "the stopped node reported", 30*time.Second, status(true))
	})
}

// runExporter runs, in this process, the export to the one broker ec sets,
// retrying quickly, until the test ends.
func runExporter(t *testing.T, st *stacktest.Stack, ec ExportConfig) *brokerexport.Exporter {
	t.Helper()
	ec.MinBackoff, ec.MaxBackoff = 10*time.Millisecond, 200*time.Millisecond
	exps, err := exporters(st.App, ec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = exps[0].Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return exps[0]
}

// testExportSurvivesFaults sells 10,000 units over 8 SKUs while the broker
// export runs as processes of their own (serve --components export), one
// leading and one standing by, to JetStream and RabbitMQ; the leader is
// killed with kill -9 twice, the standby taking over each time; the NATS
// server restarts once and is frozen (SIGSTOP) once, the leader's
// readiness reporting the export failing meanwhile; the RabbitMQ node is
// frozen once and killed (-9) and restarted once. The JetStream stream then holds exactly
// one message per ledger event, in seq order per SKU; an AMQP consumer
// that drops repeats by message-id sees every event once, in seq order per
// SKU. It returns the SKUs sold.
func testExportSurvivesFaults(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, rabbit *brokertest.RabbitMQ) []string {
	consumer := consumeAMQP(t, rabbit.URL(), "orders")

	const skuCount, perSKU = 8, 1250
	skus := make([]string, skuCount)
	for i := range skus {
		skus[i] = fmt.Sprintf("bx.%d:a", i) // '.' and ':' go into one token
		st.SKU(t, skus[i], perSKU, 0)
	}
	ctx := context.Background()
	began := time.Now()
	saleDone := make(chan error, 1)
	go func() {
		// Many callers at once, as in a sale: their attempts share script
		// calls, so the sale takes seconds even under the race detector.
		const callers = 200
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for w := range callers {
			wg.Go(func() {
				for i := w; i < skuCount*perSKU; i += callers {
					sku := skus[i%skuCount]
					cmd, err := ledger.NewDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i))
					if err == nil {
						_, err = st.Service.Deduct(ctx, cmd)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		saleDone <- <-errs
	}()

	export := childConfig{DatabaseURL: st.DatabaseURL, RedisURL: st.Redis.URL(), Components: []string{ComponentExport},
		Export: ExportConfig{NATSURL: n.URL(), NATSCreateStream: true, AMQPURL: rabbit.URL(),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}
	startExport := func() *serveProcess {
		export.DataDir = t.TempDir()
		p := spawnChild(t, export)
		p.waitListening(t)
		return p
	}
	streamHolds := func(atLeast int) func() bool {
		return func() bool { return brokertest.StreamCount(n.URL(), natsexport.DefaultStream) >= atLeast }
	}
	// inFlight is what the killed export had published without recording
	// it: once its last messages arrived, the distinct AMQP arrivals past
	// the cursors.
	var inFlight int
	kill := func(p *serveProcess) {
		p.kill()
		recorded := exportCursorSum(t, st, "amqp") // before a standby can record anything
		// The killed export's last confirmed messages reach the consumer;
		// a standby takes the lock at its next poll, up to a second later.
		time.Sleep(200 * time.Millisecond)
		inFlight += max(0, consumer.distinct()-recorded)
	}

	// Two export processes: one leads, the other stands by and takes
	// over when the leader is killed; a new standby replaces the dead.
	leader := func(ps ...*serveProcess) *serveProcess {
		var found *serveProcess
		localstacktest.WaitFor(t, "one export process leading", 30*time.Second, func() bool {
			found = nil
			for _, p := range ps {
				if strings.Contains(call(t, "GET", p.url+"/metrics", "", "").body, "\ninvledger_export_leader 1\n") {
					if found != nil {
						return false // two at once: wait for the old one to notice
					}
					found = p
				}
			}
			return found != nil
		})
		return found
	}
	other := func(p, a, b *serveProcess) *serveProcess {
		if p == a {
			return b
		}
		return a
	}
	a, b := startExport(), startExport()
	localstacktest.WaitFor(t, "1,500 events in the stream", 60*time.Second, streamHolds(1500))
	lead := leader(a, b)
	standby := other(lead, a, b)
	kill(lead)
	// The standby takes the lock at its next poll, up to a second after
	// the kill, while a process just started tries it at once: the
	// replacement starts only once the standby leads, so the takeover is
	// the standby's, and the replacement then stands by beside it.
	if leader(standby) != standby {
		t.Fatal("the standby did not take over the export")
	}
	c := startExport()
	if leader(standby, c) != standby {
		t.Fatal("the replacement took the lead from the running standby")
	}
	localstacktest.WaitFor(t, "4,000 events in the stream", 60*time.Second, streamHolds(4000))
	n.Stop()
	n.Start()
	n.Freeze()
	waitExportNote(t, standby, "export_nats", "failing")
	n.Thaw()
	localstacktest.WaitFor(t, "6,000 events in the stream", 60*time.Second, streamHolds(6000))
	kill(standby)
	if leader(c) != c {
		t.Fatal("the second standby did not take over the export")
	}
	rabbit.Freeze()
	time.Sleep(time.Second)
	rabbit.Thaw()
	rabbit.Kill()
	rabbit.Start()
	if err := <-saleDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("sale done after %s", time.Since(began).Round(time.Millisecond))

	// What the ledger holds, once it holds the whole sale.
	want := map[string]domain.Event{}
	for _, sku := range skus {
		st.WaitProjected(t, sku, 60*time.Second)
	}
	if err := approot.Of(st.App).Adapters.Ledger.ScanAll(ctx, func(e domain.Event) error {
		want[e.ID] = e
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != skuCount*(perSKU+1) { // the purchases and each SKU's stocking
		t.Fatalf("the ledger holds %d events, want %d", len(want), skuCount*(perSKU+1))
	}
	localstacktest.WaitFor(t, "the whole ledger in the stream", 90*time.Second, streamHolds(len(want)))
	localstacktest.WaitFor(t, "the whole ledger at the AMQP consumer", 90*time.Second, func() bool {
		return exportCursorSum(t, st, "amqp") == len(want) && consumer.distinct() >= len(want)
	})
	t.Logf("exported after %s", time.Since(began).Round(time.Millisecond))
	time.Sleep(time.Second) // anything extra would arrive now

	// JetStream: exactly one message per event, in seq order per SKU.
	msgs := brokertest.ReadStream(t, n.URL(), natsexport.DefaultStream)
	if len(msgs) != len(want) {
		t.Errorf("the stream holds %d messages for %d ledger events", len(msgs), len(want))
	}
	checkOnceInOrder(t, "jetstream", want, len(msgs), func(i int) (id, subject string, body []byte) {
		return msgs[i].Header.Get(jetstream.MsgIDHeader), msgs[i].Subject, msgs[i].Data
	}, true)

	// AMQP: once each after dropping repeats, in seq order per SKU.
	consumer.mu.Lock()
	arrivals := consumer.arrivals
	consumer.mu.Unlock()
	repeats := checkOnceInOrder(t, "amqp", want, len(arrivals), func(i int) (id, subject string, body []byte) {
		return arrivals[i].MessageId, arrivals[i].RoutingKey, arrivals[i].Body
	}, false)
	// Each RabbitMQ fault fails at most the windows in flight, which are
	// published again whole.
	if bound := inFlight + 2*brokerexport.DefaultWorkers*amqpexport.Window; repeats > bound {
		t.Errorf("the AMQP consumer dropped %d repeats; the export had %d in flight at its kills, and two broker faults repeat at most %d",
			repeats, inFlight, bound-inFlight)
	}
	// What the console's Health page shows, read from the cursors.
	lags, err := pgstore.NewPostgresExportStore(st.Pool).Lags(ctx)
	if err != nil || len(lags) != 2 || lags[0].Broker != "amqp" || lags[1].Broker != "nats" || lags[0].Events != 0 || lags[1].Events != 0 {
		t.Errorf("export lags once everything was exported: %+v (%v)", lags, err)
	}
	t.Logf("%d events; jetstream holds %d messages; amqp: %d arrivals, %d repeats dropped, %d in flight at the kills",
		len(want), len(msgs), len(arrivals), repeats, inFlight)
	return skus
}

// waitExportNote waits until p's readiness, which stays 200, notes want
// for the export to a broker (name: export_nats, export_amqp).
func waitExportNote(t *testing.T, p *serveProcess, name, want string) {
	t.Helper()
	var ready answer
	localstacktest.WaitFor(t, name+" "+want+" in readiness", 30*time.Second, func() bool {
		ready = call(t, "GET", p.url+"/readyz", "", "")
		return ready.status == 200 && strings.Contains(ready.body, fmt.Sprintf("%q:%q", name, want))
	})
}

// checkOnceInOrder checks that the n messages (id, subject or routing
// key, body) hold every event of want, in seq order per SKU, and nothing
// else; it drops repeats by id unless strict, where a repeat is an error,
// and returns how many it dropped.
func checkOnceInOrder(t *testing.T, broker string, want map[string]domain.Event, n int,
	at func(i int) (id, subject string, body []byte), strict bool) (repeats int) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int64{}
	for i := range n {
		id, subject, body := at(i)
		e, ok := want[id]
		if !ok {
			t.Fatalf("%s: message %s is no ledger event", broker, id)
		}
		if seen[id] {
			if strict {
				t.Fatalf("%s: event %s (%s seq %d) stored twice", broker, id, e.SKU, e.Seq)
			}
			repeats++
			continue
		}
		var p wire.EventJSON
		if err := json.Unmarshal(body, &p); err != nil || p.EventID != id || p.Seq != e.Seq || p.SKU != e.SKU {
			t.Fatalf("%s: message %s carries %s (%v), the ledger holds %+v", broker, id, body, err, e)
		}
		if subject != brokerexport.DefaultPrefix+"."+brokerexport.Token(e.SKU) {
			t.Fatalf("%s: message %s of %s on %s", broker, id, e.SKU, subject)
		}
		if e.Seq != last[e.SKU]+1 {
			t.Fatalf("%s: %s seq %d arrived after seq %d", broker, e.SKU, e.Seq, last[e.SKU])
		}
		seen[id], last[e.SKU] = true, e.Seq
	}
	if len(seen) != len(want) {
		t.Errorf("%s: %d of the %d ledger events arrived", broker, len(seen), len(want))
	}
	return repeats
}

// TestABrokerThatIsDownNeverStopsSales runs the API with the export to a
// NATS server that is not there: /readyz stays 200 and reports the
// export failing, purchases go on, and the metrics say so; the URL's
// password shows nowhere.
func TestABrokerThatIsDownNeverStopsSales(t *testing.T) {
	localstacktest.SkipShort(t)
	st := stacktest.New(t)
	st.SKU(t, "down-1", 10, 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "nats://invledger:broker-secret@" + l.Addr().String()
	l.Close() // nothing listens there now
	api := startServe(t, st, Config{Components: []string{ComponentAPI, ComponentExport}, Tokens: testTokens,
		Export: ExportConfig{NATSURL: nowhere, NATSCreateStream: true}})

	var ready answer
	localstacktest.WaitFor(t, "the export reported failing", 30*time.Second, func() bool {
		ready = call(t, "GET", api+"/readyz", "", "")
		return strings.Contains(ready.body, `"export_nats":"failing"`)
	})
	if ready.status != 200 || !strings.HasPrefix(ready.body, `{"status":"ready"`) {
		t.Fatalf("readyz with the broker down: %d %s", ready.status, ready.body)
	}
	if r := call(t, "POST", api+"/v1/skus/down-1/deduct", secretGateway, `{"user_id":"u1","qty":1,"request_id":"r1"}`); r.status != 200 {
		t.Fatalf("deduct with the broker down: %d %s", r.status, r.body)
	}
	metrics := call(t, "GET", api+"/metrics", "", "").body
	for _, want := range []string{"\ninvledger_export_up{broker=\"nats\"} 0\n", "\ninvledger_export_leader 1\n"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if strings.Contains(metrics+ready.body, "broker-secret") {
		t.Fatal("the broker URL's password shows")
	}
}

// testReplay replays sku from seq 1,000 to both brokers: the AMQP
// consumer gets exactly seq 1,000 to the end again, in order and under the
// ids it already has, so de-duplicating by message-id it sees nothing new;
// JetStream drops them all within its de-duplication window.
func testReplay(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, rabbit *brokertest.RabbitMQ, sku string) {
	q := consumeAMQP(t, rabbit.URL(), "replay")
	before := brokertest.StreamCount(n.URL(), natsexport.DefaultStream)
	ids := map[string]bool{}
	for _, m := range brokertest.ReadStream(t, n.URL(), natsexport.DefaultStream) {
		ids[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	var last int64
	if err := st.Pool.QueryRow(context.Background(), `SELECT last_seq FROM balances WHERE sku = $1`, sku).Scan(&last); err != nil {
		t.Fatal(err)
	}
	pubs, err := publishers(ExportConfig{NATSURL: n.URL(), AMQPURL: rabbit.URL()}, st.App.Log)
	if err != nil {
		t.Fatal(err)
	}
	store := pgstore.NewPostgresExportStore(st.Pool)
	for _, p := range pubs {
		got, err := brokerexport.Replay(context.Background(), store, p, map[string]int64{sku: 1000})
		_ = p.Close()
		if err != nil || int64(got) != last-999 {
			t.Fatalf("%s: replay published %d events (%v), want %d", p.Broker(), got, err, last-999)
		}
	}
	localstacktest.WaitFor(t, "the replay at the AMQP consumer", 30*time.Second, func() bool { return int64(q.count()) >= last-999 })
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	again := q.deliveries()
	if int64(len(again)) != last-999 {
		t.Fatalf("the replay delivered %d messages, want %d", len(again), last-999)
	}
	for i, d := range again {
		seq, _ := d.Headers[brokerexport.HeaderSeq].(int64)
		if d.Headers[brokerexport.HeaderSKU] != sku || seq != int64(1000+i) || !ids[d.MessageId] {
			t.Fatalf("replayed message %d: %s of %v seq %d (an id already delivered: %v)", i, d.MessageId, d.Headers[brokerexport.HeaderSKU], seq, ids[d.MessageId])
		}
	}
	if after := brokertest.StreamCount(n.URL(), natsexport.DefaultStream); after != before {
		t.Fatalf("the stream held %d messages before the replay and %d after", before, after)
	}
}

// testAMQPRefusals: bad credentials, an exchange no queue is bound to
// and a disk alarm are each reported naming the setting, the password
// never showing.
func testAMQPRefusals(t *testing.T, st *stacktest.Stack, rabbit *brokertest.RabbitMQ) {
	sell := func(sku string) {
		t.Helper()
		st.SKU(t, sku, 3, 0)
		cmd, err := ledger.NewDeductCommand(sku, "u1", 1, "r1")
		if err == nil {
			_, err = st.Service.Deduct(context.Background(), cmd)
		}
		if err != nil {
			t.Fatal(err)
		}
		st.WaitProjected(t, sku, 30*time.Second)
	}
	expect := func(t *testing.T, ec ExportConfig, setting string) {
		t.Helper()
		exp := runExporter(t, st, ec)
		var got error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var se *brokerexport.SettingError
			if got = exp.Status().Err; errors.As(got, &se) && se.Setting == setting {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no refusal naming %s within 30s; the export reports %v", setting, got)
			}
		}
		if strings.Contains(got.Error(), brokertest.RabbitPassword) || strings.Contains(got.Error(), "wrong-secret") {
			t.Fatalf("the refusal shows the password: %v", got)
		}
		t.Logf("reported: %v", got)
	}
	sell("refused")
	t.Run("no queue bound", func(t *testing.T) {
		expect(t, ExportConfig{AMQPURL: rabbit.URL(), AMQPExchange: "unbound"}, brokerexport.SettingAMQPExchange)
	})
	// RabbitMQ answers a refused login after 3 s, and the alarm takes two
	// rabbitmqctl runs: the two overlap (a login is refused with or
	// without the alarm).
	t.Run("bad credentials", func(t *testing.T) {
		t.Parallel()
		expect(t, ExportConfig{AMQPURL: strings.Replace(rabbit.URL(), brokertest.RabbitPassword, "wrong-secret", 1)}, brokerexport.SettingAMQPURL)
	})
	t.Run("disk alarm", func(t *testing.T) {
		t.Parallel()
		consumeAMQP(t, rabbit.URL(), "alarmed")
		rabbit.SetDiskFreeLimit("1000000GB")
		defer rabbit.SetDiskFreeLimit("10MB")
		rabbit.WaitPublishBlocked()
		sell("alarmed") // events to publish while the alarm is on
		expect(t, ExportConfig{AMQPURL: rabbit.URL()}, brokerexport.SettingAMQPURL)
	})
}
