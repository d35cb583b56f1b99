package natsexport_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/docs/orderconsumer"
	"github.com/invledger/invledger/domain"
)

// flakyOrders stands in for the service's database: its first write of
// every fifth purchase fails before writing, and of every seventh fails
// after writing (the answer lost), so both are delivered again.
type flakyOrders struct {
	mu      sync.Mutex
	orders  map[string]wire.EventJSON
	tries   map[string]int
	repeats int
	bySKU   map[string][]int64
}

func (o *flakyOrders) CreateOnce(_ context.Context, id string, p wire.EventJSON) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tries[id]++
	if p.Seq%5 == 0 && o.tries[id] == 1 {
		return false, errors.New("database unavailable")
	}
	if _, ok := o.orders[id]; ok {
		o.repeats++
		return false, nil
	}
	o.orders[id] = p
	o.bySKU[p.SKU] = append(o.bySKU[p.SKU], p.Seq)
	if p.Seq%7 == 0 && o.tries[id] == 1 {
		return true, errors.New("connection lost before the commit's answer")
	}
	return true, nil
}

func (o *flakyOrders) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.orders)
}

// TestOrderServiceCreatesEachOrderOnce runs the order service of the
// export's example (docs/orderconsumer) against this publisher: it
// publishes a sale the way the export does, replays part of it, and runs the example service, whose writes
// fail now and then: every purchase becomes exactly one order, in seq
// order per SKU, and nothing else does.
func TestOrderServiceCreatesEachOrderOnce(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	n := brokertest.StartNATS(t, brokertest.NATSConfig{})
	pub, err := natsexport.New(natsexport.Config{URL: n.URL(), DuplicateWindow: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := pub.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var all []brokerexport.Message
	for _, sku := range []string{"phone.x", "case:1"} {
		msgs := []brokerexport.Message{brokerexport.NewMessage(domain.Event{ID: uuid.NewString(), SKU: sku, Seq: 1,
			Type: domain.EventStocked, Qty: 40, Delta: 40, Balance: 40, OccurredAt: time.Now()})}
		for seq := int64(2); seq <= 41; seq++ {
			msgs = append(msgs, brokerexport.NewMessage(domain.Event{ID: uuid.NewString(), SKU: sku, Seq: seq, Type: domain.EventDeducted,
				Qty: 1, Delta: -1, Balance: 41 - seq, User: fmt.Sprintf("u%d", seq), OccurredAt: time.Now()}))
		}
		if o := pub.Publish(ctx, []brokerexport.Run{{SKU: sku, Msgs: msgs}})[0]; o.Err != nil || o.UpTo != 41 {
			t.Fatalf("published %s up to %d of 41: %v", sku, o.UpTo, o.Err)
		}
		all = append(all, msgs...)
	}
	time.Sleep(1100 * time.Millisecond) // past the stream's de-duplication window
	if err := pub.Replay(ctx, all[10:30]); err != nil {
		t.Fatal(err)
	}

	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	orders := &flakyOrders{orders: map[string]wire.EventJSON{}, tries: map[string]int{}, bySKU: map[string][]int64{}}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- orderconsumer.Run(runCtx, js, orderconsumer.Config{Stream: natsexport.DefaultStream, Durable: "orders",
			Subjects: brokerexport.DefaultPrefix + ".>", RetryDelay: 20 * time.Millisecond}, orders)
	}()
	localstacktest.WaitFor(t, "80 orders", 60*time.Second, func() bool { return orders.count() >= 80 })
	time.Sleep(500 * time.Millisecond) // redeliveries and replays would arrive now
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	orders.mu.Lock()
	defer orders.mu.Unlock()
	if len(orders.orders) != 80 {
		t.Fatalf("%d orders for 80 purchases", len(orders.orders))
	}
	for _, m := range all {
		p, ok := orders.orders[m.EventID]
		if (m.Seq > 1) != ok || ok && p.Seq != m.Seq {
			t.Fatalf("event %s of %s seq %d: order %v %+v", m.EventID, m.SKU, m.Seq, ok, p)
		}
	}
	for sku, seqs := range orders.bySKU {
		for i, seq := range seqs {
			if seq != int64(i)+2 {
				t.Fatalf("%s: orders made in seq order %v", sku, seqs)
			}
		}
	}
	if orders.repeats < 19 { // the replayed purchases, and the writes whose answer was lost
		t.Fatalf("only %d repeats reached the service: the test published none", orders.repeats)
	}
}
