package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamMessage is a message a JetStream stream holds.
type StreamMessage struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// ReadStream returns every message stream holds on the server at url, in
// stream order, failing t when it cannot read them.
func ReadStream(t testing.TB, url, stream string) []StreamMessage {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	// An ordered consumer reads the stream in batches: one request per
	// message would take seconds for a sale's worth.
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]StreamMessage, 0, info.State.Msgs)
	for deadline := time.Now().Add(60 * time.Second); uint64(len(out)) < info.State.Msgs; {
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: read %d of its %d messages in 60s", stream, len(out), info.State.Msgs)
		}
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			out = append(out, StreamMessage{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
			n++
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		if n == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

// StreamCount is how many messages stream holds, or -1 while it cannot
// be read (the server restarting, the stream not created yet).
func StreamCount(url, stream string) int {
	nc, err := nats.Connect(url)
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}
