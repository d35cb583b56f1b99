package brokertest

import (
	"context"
	"testing"

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
	var out []StreamMessage
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream %s: message %d: %v", stream, seq, err)
		}
		out = append(out, StreamMessage{Subject: m.Subject, Header: m.Header, Data: m.Data})
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
