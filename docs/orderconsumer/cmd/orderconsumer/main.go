// Command orderconsumer runs the order service of docs/broker-export.md
// (package orderconsumer) against a NATS server that invledger's broker
// export publishes to, and prints each order it creates, one line each,
// until SIGINT or SIGTERM:
//
//	go run ./docs/orderconsumer/... --nats-url nats://127.0.0.1:4222
//
// Its orders are kept in memory, de-duplicated by event id as a real
// service's table would be, so a restart starts over; the durable
// consumer's position survives it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/docs/orderconsumer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run consumes as args say and returns the exit status: 0 once ctx ends,
// 2 for bad flags, 1 when the broker cannot be used.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orderconsumer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats-url", nats.DefaultURL, "the NATS server invledger exports to (serve's --export-nats-url)")
	cfg := orderconsumer.Config{RetryDelay: time.Second}
	fs.StringVar(&cfg.Stream, "stream", "INVLEDGER_EVENTS", "the export's JetStream stream (serve's --export-nats-stream)")
	fs.StringVar(&cfg.Subjects, "subjects", "invledger.events.>", "the subjects to consume: the export's prefix (--export-prefix) and > for every SKU")
	fs.StringVar(&cfg.Durable, "durable", "orders", "the durable consumer's name: its position survives restarts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var bad []error
	for name, v := range map[string]string{"nats-url": *url, "stream": cfg.Stream, "subjects": cfg.Subjects, "durable": cfg.Durable} {
		if v == "" {
			bad = append(bad, fmt.Errorf("--%s must not be empty", name))
		}
	}
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Errorf("unexpected argument %q: every setting is a flag", fs.Arg(0)))
	}
	if err := errors.Join(bad...); err != nil {
		fmt.Fprintln(stderr, "orderconsumer:", err)
		return 2
	}
	nc, err := nats.Connect(*url, nats.Name("orderconsumer"))
	if err != nil {
		log.Error("cannot reach the NATS server", "nats_url", *url, "err", err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Error("JetStream", "err", err)
		return 1
	}
	log.Info("consuming", "nats_url", *url, "stream", cfg.Stream, "subjects", cfg.Subjects, "durable", cfg.Durable)
	err = orderconsumer.Run(ctx, js, cfg, &printedOrders{w: stdout, seen: map[string]bool{}})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		log.Error("no such stream: is invledger's export on (serve --export-nats-url), and --stream its --export-nats-stream?", "stream", cfg.Stream, "err", err)
		return 1
	}
	if err != nil {
		log.Error("consume", "err", err)
		return 1
	}
	return 0
}

// printedOrders is the service's store: an order per event id, created
// once and printed then.
type printedOrders struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]bool
}

func (o *printedOrders) CreateOnce(_ context.Context, eventID string, p wire.EventJSON) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[eventID] {
		return false, nil
	}
	if _, err := fmt.Fprintf(o.w, "order sku=%s seq=%d user=%s qty=%d request=%s event=%s\n", p.SKU, p.Seq, p.UserID, p.Qty, p.RequestID, eventID); err != nil {
		return false, err // not created: the message comes again
	}
	o.seen[eventID] = true
	return true, nil
}
