package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/wire"
)

// commandEnv, set to 1, makes the test binary run as the command, so that
// the test runs docs/broker-export.md's `go run` line without a go build.
const commandEnv = "ORDERCONSUMER_TEST_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(commandEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// docCommand returns the arguments of the `go run ./docs/orderconsumer/...`
// line of docs/broker-export.md, single quotes taken off as the shell does.
func docCommand(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../../broker-export.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go run \./docs/orderconsumer/\.\.\. (.*)$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/broker-export.md has no line `go run ./docs/orderconsumer/... FLAGS`")
	}
	var args []string
	for _, f := range strings.Fields(string(m[1])) {
		args = append(args, strings.Trim(f, "'"))
	}
	return args
}

// TestTheDocsCommandPrintsEachOrderOnce runs the command as
// docs/broker-export.md gives it, against a private nats-server holding
// what the export publishes of a sale (a stocked event, two purchases, the
// first published again under its id after the stream forgot it): it
// prints one order per purchase, and exits 0 on SIGINT.
func TestTheDocsCommandPrintsEachOrderOnce(t *testing.T) {
	args := docCommand(t)
	n := brokertest.StartNATS(t, brokertest.NATSConfig{})
	for i, a := range args {
		if strings.HasPrefix(a, "nats://") {
			args[i] = n.URL()
		}
	}
	if !strings.Contains(strings.Join(args, " "), n.URL()) {
		t.Fatalf("the documented command %q names no nats:// URL", args)
	}

	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// As the export creates it, with a short de-duplication window so
	// that a message published again after it reaches the consumer.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "INVLEDGER_EVENTS", Subjects: []string{"invledger.events.>"},
		Duplicates: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	publish := func(e wire.EventJSON) {
		t.Helper()
		body, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "invledger.events." + e.SKU, Data: body,
			Header: nats.Header{jetstream.MsgIDHeader: []string{e.EventID}}}); err != nil {
			t.Fatal(err)
		}
	}
	events := []wire.EventJSON{
		{EventID: "e1", SKU: "tv-1", Seq: 1, Type: "stocked", Qty: 10, BalanceAfter: 10},
		{EventID: "e2", SKU: "tv-1", Seq: 2, Type: "deducted", Qty: 2, BalanceAfter: 8, UserID: "u-1", RequestID: "r-1"},
		{EventID: "e3", SKU: "tv-1", Seq: 3, Type: "deducted", Qty: 1, BalanceAfter: 7, UserID: "u-2", RequestID: "r-2"},
	}
	for _, e := range events {
		publish(e)
	}
	// Past the window, the stream takes e2 again, as it would take a
	// replay (`invledger export replay`).
	localstacktest.WaitFor(t, "the stream to take e2 again", 10*time.Second, func() bool {
		publish(events[1])
		info, err := js.Stream(ctx, "INVLEDGER_EVENTS")
		return err == nil && info.CachedInfo().State.Msgs == 4
	})

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr localstacktest.SyncBuffer
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), commandEnv+"=1")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// The consumer has taken all 4 messages once it has none pending:
	// acknowledged one at a time, the last goes after the orders.
	localstacktest.WaitFor(t, "the command to consume every message", 20*time.Second, func() bool {
		c, err := js.Consumer(ctx, "INVLEDGER_EVENTS", "orders")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream == 4
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the command after SIGINT: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the command did not exit within 20s of SIGINT\n%s", stderr.String())
	}
	want := "order sku=tv-1 seq=2 user=u-1 qty=2 request=r-1 event=e2\norder sku=tv-1 seq=3 user=u-2 qty=1 request=r-2 event=e3\n"
	if got := stdout.String(); got != want {
		t.Fatalf("the command printed\n%s\nwant\n%s\nstderr:\n%s", got, want, stderr.String())
	}
}

// TestBadFlagsAreNamed: a setting left empty or an argument is refused,
// exit 2, naming it, before any connection.
func TestBadFlagsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-url", ""}, "--nats-url"},
		{[]string{"--stream", ""}, "--stream"},
		{[]string{"nats://127.0.0.1:4222"}, `unexpected argument "nats://127.0.0.1:4222"`},
		{[]string{"--queue", "x"}, "-queue"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 naming %s", tc.args, code, stderr.String(), tc.want)
		}
	}
}
