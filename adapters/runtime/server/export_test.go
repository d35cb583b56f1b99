package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/adapters/driven/eventwebhook"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/brokerexport"
	"github.com/invledger/invledger/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/internal/brokertest"
	"github.com/invledger/invledger/ledger"
)

// amqpConsumer consumes the AMQP export from a queue bound to every
// routing key, as an order service would, keeping every arrival.
type amqpConsumer struct {
	mu       sync.Mutex
	arrivals []amqp.Delivery
}

func consumeAMQP(t *testing.T, url string) *amqpConsumer {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("invledger.events", amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("orders", true, false, false, false, nil)
	if err == nil {
		err = ch.QueueBind(q.Name, brokerexport.DefaultPrefix+".#", "invledger.events", false, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "test", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &amqpConsumer{}
	go func() {
		for d := range deliveries {
			c.mu.Lock()
			c.arrivals = append(c.arrivals, d)
			c.mu.Unlock()
		}
	}()
	return c
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

// TestBrokerExportSurvivesKillsAndABrokerRestart sells 20,000 units over
// 8 SKUs while the broker export runs as a process of its own (serve
// --components export) to JetStream and RabbitMQ; it is killed with
// kill -9 twice and started again, and the NATS server restarts once.
// The JetStream stream then holds exactly one message per ledger event,
// in seq order per SKU; an AMQP consumer that drops repeats by
// message-id sees every event once, in seq order per SKU, and the repeats
// it dropped are no more than what the export had published without
// recording at each kill.
func TestBrokerExportSurvivesKillsAndABrokerRestart(t *testing.T) {
	localstacktest.SkipShort(t)
	rabbit, rabbitReady := brokertest.StartRabbitMQAsync(t, brokertest.RabbitMQConfig{})
	st := stacktest.New(t)
	n := brokertest.StartNATS(t, brokertest.NATSConfig{})
	rabbitReady()
	consumer := consumeAMQP(t, rabbit.URL())
	st.RunProjector(t)

	const skuCount, perSKU = 8, 2500
	skus := make([]string, skuCount)
	for i := range skus {
		skus[i] = fmt.Sprintf("bx.%d:a", i) // '.' and ':' go into one token
		st.SKU(t, skus[i], perSKU, 0)
	}
	ctx := context.Background()
	saleDone := make(chan error, 1)
	go func() {
		errs := make(chan error, 40)
		var wg sync.WaitGroup
		for w := range 40 {
			wg.Go(func() {
				for i := w; i < skuCount*perSKU; i += 40 {
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
		p, lines := spawnChild(t, export)
		p.waitListening(t, lines)
		return p
	}
	streamHolds := func(atLeast int) func() bool {
		return func() bool { return brokertest.StreamCount(n.URL(), natsexport.DefaultStream) >= atLeast }
	}
	// inFlight is what the killed export had published without recording
	// it: once its last messages arrived, the AMQP arrivals past the cursors.
	var inFlight int
	kill := func(p *serveProcess) {
		p.kill()
		time.Sleep(500 * time.Millisecond) // the last confirmed messages reach the consumer
		inFlight += max(0, consumer.count()-exportCursorSum(t, st, "amqp"))
	}

	first := startExport()
	localstacktest.WaitFor(t, "3,000 events in the stream", 60*time.Second, streamHolds(3000))
	kill(first)
	second := startExport()
	localstacktest.WaitFor(t, "8,000 events in the stream", 60*time.Second, streamHolds(8000))
	n.Stop()
	n.Start()
	localstacktest.WaitFor(t, "12,000 events in the stream", 60*time.Second, streamHolds(12000))
	kill(second)
	startExport()
	if err := <-saleDone; err != nil {
		t.Fatal(err)
	}

	// What the ledger holds, once it holds the whole sale.
	want := map[string]domain.Event{}
	for _, sku := range skus {
		st.WaitProjected(t, sku, 60*time.Second)
	}
	if err := st.App.Adapters.Ledger.ScanAll(ctx, func(e domain.Event) error {
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
		return exportCursorSum(t, st, "amqp") == len(want) && consumer.count() >= len(want)
	})
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
	if repeats > inFlight {
		t.Errorf("the AMQP consumer dropped %d repeats; the export had %d in flight at its kills", repeats, inFlight)
	}
	t.Logf("%d events; jetstream holds %d messages; amqp: %d arrivals, %d repeats dropped, %d in flight at the kills",
		len(want), len(msgs), len(arrivals), repeats, inFlight)
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
		var p eventwebhook.Payload
		if err := json.Unmarshal(body, &p); err != nil || p.Data.EventID != id || p.Data.Seq != e.Seq || p.Data.SKU != e.SKU {
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
