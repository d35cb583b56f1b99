package amqpexport_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/adapters/driven/pgstore"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/internal/brokerexport"
	"github.com/invledger/invledger/internal/brokerexport/amqpexport"
	"github.com/invledger/invledger/internal/brokertest"
	"github.com/invledger/invledger/ledger"
)

var quiet = slog.New(slog.DiscardHandler)

// queue is a consumer's queue bound to every routing key of the export.
type queue struct {
	mu  sync.Mutex
	got []amqp.Delivery
}

func bindQueue(t *testing.T, url, name string) *queue {
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
	if err := ch.ExchangeDeclare(amqpexport.DefaultExchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(name, brokerexport.DefaultPrefix+".#", amqpexport.DefaultExchange, false, nil); err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume(name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := &queue{}
	go func() {
		for m := range d {
			q.mu.Lock()
			q.got = append(q.got, m)
			q.mu.Unlock()
		}
	}()
	return q
}

func (q *queue) deliveries() []amqp.Delivery {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]amqp.Delivery(nil), q.got...)
}

// run runs an exporter over pub until the test ends; it returns the exporter.
func run(t *testing.T, st *stacktest.Stack, pub brokerexport.Publisher) *brokerexport.Exporter {
	t.Helper()
	exp, err := brokerexport.New(brokerexport.Config{Store: pgstore.NewPostgresExportStore(st.Pool), Publisher: pub,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Metrics: brokerexport.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = exp.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return exp
}

func sell(t *testing.T, st *stacktest.Stack, sku string, n int) {
	t.Helper()
	st.SKU(t, sku, int64(n), 0)
	for i := range n {
		cmd, err := ledger.NewDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r%d", i))
		if err == nil {
			_, err = st.Service.Deduct(context.Background(), cmd)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAMQPExport runs over one private RabbitMQ node: an export that a
// replay follows, and the refusals.
func TestAMQPExport(t *testing.T) {
	localstacktest.SkipShort(t)
	rabbit, ready := brokertest.StartRabbitMQAsync(t, brokertest.RabbitMQConfig{})
	st := stacktest.New(t)
	sell(t, st, "rp.1:x", 60)
	sell(t, st, "rp-2", 30)
	st.RunProjector(t)
	st.WaitProjected(t, "rp.1:x", 30*time.Second)
	st.WaitProjected(t, "rp-2", 30*time.Second)
	ready()

	t.Run("replay", func(t *testing.T) { testReplay(t, st, rabbit) })
	t.Run("refusals", func(t *testing.T) { testRefusals(t, st, rabbit) })
}

// testReplay exports the ledger, then replays rp.1:x from seq 40: the
// consumer gets exactly seq 40 to 61 of it again, under the same ids, so
// de-duplicating by message-id it sees nothing new.
func testReplay(t *testing.T, st *stacktest.Stack, rabbit *brokertest.RabbitMQ) {
	q := bindQueue(t, rabbit.URL(), "replay")
	pub, err := amqpexport.New(amqpexport.Config{URL: rabbit.URL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	exp := run(t, st, pub)
	localstacktest.WaitFor(t, "the export", 60*time.Second, func() bool {
		return exp.Status().Err == nil && exp.Status().LagEvents == 0 && len(q.deliveries()) >= 61+31
	})
	first := q.deliveries()
	ids := map[string]bool{}
	for _, d := range first {
		if ids[d.MessageId] {
			t.Fatalf("message %s arrived twice", d.MessageId)
		}
		ids[d.MessageId] = true
		if d.DeliveryMode != amqp.Persistent || d.Headers[brokerexport.HeaderSKU] == nil || d.ContentType != "application/json" {
			t.Fatalf("message %s: mode %d, headers %v", d.MessageId, d.DeliveryMode, d.Headers)
		}
	}

	replayer, err := amqpexport.New(amqpexport.Config{URL: rabbit.URL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer replayer.Close()
	n, err := brokerexport.Replay(context.Background(), pgstore.NewPostgresExportStore(st.Pool), replayer, map[string]int64{"rp.1:x": 40})
	if err != nil || n != 22 {
		t.Fatalf("replay published %d events (%v), want 22", n, err)
	}
	localstacktest.WaitFor(t, "the replay", 30*time.Second, func() bool { return len(q.deliveries()) >= len(first)+22 })
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	again := q.deliveries()[len(first):]
	if len(again) != 22 {
		t.Fatalf("the replay delivered %d messages, want 22", len(again))
	}
	for i, d := range again {
		seq, _ := d.Headers[brokerexport.HeaderSeq].(int64)
		if d.Headers[brokerexport.HeaderSKU] != "rp.1:x" || seq != int64(40+i) || !ids[d.MessageId] {
			t.Fatalf("replayed message %d: %s %v seq %d (known id: %v)", i, d.MessageId, d.Headers[brokerexport.HeaderSKU], seq, ids[d.MessageId])
		}
	}
}

// testRefusals: bad credentials, an exchange no queue is bound to and a
// disk alarm are each reported naming the setting; the password never shows.
func testRefusals(t *testing.T, st *stacktest.Stack, rabbit *brokertest.RabbitMQ) {
	// A fresh SKU, so the refused exports have something to publish.
	sell(t, st, "refused", 5)
	st.WaitProjected(t, "refused", 30*time.Second)
	expect := func(t *testing.T, cfg amqpexport.Config, setting string) {
		t.Helper()
		cfg.Logger, cfg.Timeout = quiet, 2*time.Second
		pub, err := amqpexport.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		exp := run(t, st, pub)
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
	t.Run("bad credentials", func(t *testing.T) {
		expect(t, amqpexport.Config{URL: strings.Replace(rabbit.URL(), brokertest.RabbitPassword, "wrong-secret", 1)}, brokerexport.SettingAMQPURL)
	})
	t.Run("no queue bound", func(t *testing.T) {
		expect(t, amqpexport.Config{URL: rabbit.URL(), Exchange: "unbound"}, brokerexport.SettingAMQPExchange)
	})
	t.Run("disk alarm", func(t *testing.T) {
		bindQueue(t, rabbit.URL(), "alarmed")
		rabbit.SetDiskFreeLimit("1000000GB")
		defer rabbit.SetDiskFreeLimit("10MB")
		rabbit.WaitPublishBlocked()
		sell(t, st, "alarmed", 3) // events to publish while the alarm is on
		st.WaitProjected(t, "alarmed", 30*time.Second)
		expect(t, amqpexport.Config{URL: rabbit.URL(), Exchange: amqpexport.DefaultExchange}, brokerexport.SettingAMQPURL)
	})
}
