package amqpexport_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/amqpexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/exporttest"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// BenchmarkExportBacklogToRabbitMQ exports a ledger backlog of b.N events
// over 1,000 SKUs, written straight into PostgreSQL, to a private
// RabbitMQ node's exchange with a durable queue bound, from the first
// poll to the last cursor write, and reports events/s. The target: at
// least 25,000 events/s on a quiet 2-core machine with the broker,
// PostgreSQL and the exporter on it (-benchtime 200000x). Runs of fewer
// than 1,000 events (make test's short run) report 0.
func BenchmarkExportBacklogToRabbitMQ(b *testing.B) {
	if b.N < exporttest.MinBacklog {
		b.ReportMetric(0, "events/s")
		return
	}
	localstacktest.SkipShort(b)
	rabbit := brokertest.StartRabbitMQ(b, brokertest.RabbitMQConfig{})
	st := stacktest.New(b)
	exporttest.WriteBacklog(b, st.Pool, b.N, 1000)
	conn, err := amqp.Dial(rabbit.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(amqpexport.DefaultExchange, amqp.ExchangeTopic, true, false, false, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDeclare("orders", true, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind("orders", brokerexport.DefaultPrefix+".#", amqpexport.DefaultExchange, false, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	pub, err := amqpexport.New(amqpexport.Config{URL: rabbit.URL(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	rate, path := exporttest.Drain(b, st.Pool, pub, b.N)
	q, err := ch.QueueDeclarePassive("orders", true, false, false, false, nil)
	if err != nil || q.Messages < b.N {
		b.Fatalf("the queue holds %d messages for %d events (%v)", q.Messages, b.N, err)
	}
	b.ReportMetric(rate, "events/s")
	b.Logf("path %s; %s", path, fmt.Sprintf("%d messages queued", q.Messages))
}
