package natsexport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/invledger/invledger/adapters/internal/brokerexport"
	"github.com/invledger/invledger/adapters/internal/brokerexport/exporttest"
	"github.com/invledger/invledger/adapters/internal/brokerexport/natsexport"
	"github.com/invledger/invledger/adapters/internal/postgres/pgstore"
	"github.com/invledger/invledger/adapters/testkit/brokertest"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sell creates skus with stock and buys n units of each, one per buyer.
func sell(t *testing.T, st *stacktest.Stack, skus []string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, sku := range skus {
		st.SKU(t, sku, int64(n), 0)
		for i := range n {
			cmd, err := ledger.NewDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r-%s-%d", sku, i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Service.Deduct(ctx, cmd); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// runExporter runs an exporter with cfg (its URL n's unless set) until
// the returned stop is called or the test ends.
func runExporter(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, cfg natsexport.Config) (stop func(), exp *brokerexport.Exporter, pub *natsexport.Publisher) {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = n.URL()
	}
	cfg.Logger = quiet
	pub, err := natsexport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	exp, err = brokerexport.New(brokerexport.Config{Store: pgstore.NewPostgresExportStore(st.Pool), Publisher: pub,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Metrics: brokerexport.NewMetrics(prometheus.NewRegistry()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = exp.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop, exp, pub
}

// storedMsg is a message the stream holds.
type storedMsg struct {
	subject, id, sku string
	seq              int64
	payload          wire.EventJSON
}

// stored reads every message of the stream, in stream order.
func stored(t *testing.T, n *brokertest.NATS, stream string) []storedMsg {
	t.Helper()
	var out []storedMsg
	for i, m := range brokertest.ReadStream(t, n.URL(), stream) {
		sm := storedMsg{subject: m.Subject, id: m.Header.Get(jetstream.MsgIDHeader), sku: m.Header.Get(brokerexport.HeaderSKU)}
		sm.seq, _ = strconv.ParseInt(m.Header.Get(brokerexport.HeaderSeq), 10, 64)
		if sm.sku == "" {
			out = append(out, sm) // not invledger's
			continue
		}
		if err := json.Unmarshal(m.Data, &sm.payload); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		out = append(out, sm)
	}
	return out
}

// checkExactlyOnce checks that msgs hold every ledger event of skus once,
// in seq order per SKU, under the SKU's subject, and nothing else.
func checkExactlyOnce(t *testing.T, st *stacktest.Stack, msgs []storedMsg, skus []string, prefix string) {
	t.Helper()
	want := map[string]domain.Event{}
	for _, sku := range skus {
		id, err := domain.NewSKUID(sku)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Ledger.ScanSKU(context.Background(), id, func(e domain.Event) error {
			want[e.ID] = e
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	last := map[string]int64{}
	seen := map[string]bool{}
	for _, m := range msgs {
		e, ok := want[m.id]
		switch {
		case !ok:
			t.Fatalf("message %s is no ledger event", m.id)
		case seen[m.id]:
			t.Fatalf("event %s stored twice", m.id)
		case m.sku != e.SKU || m.seq != e.Seq || m.payload.EventID != e.ID || m.payload.Seq != e.Seq || m.payload.Type != string(e.Type):
			t.Fatalf("message %s: headers %s/%d, body %+v; ledger event %+v", m.id, m.sku, m.seq, m.payload, e)
		case m.subject != prefix+"."+brokerexport.Token(e.SKU):
			t.Fatalf("message %s on subject %s", m.id, m.subject)
		case m.seq != last[m.sku]+1:
			t.Fatalf("%s: seq %d after %d", m.sku, m.seq, last[m.sku])
		}
		seen[m.id], last[m.sku] = true, m.seq
	}
	if len(seen) != len(want) {
		t.Fatalf("stream holds %d of the %d ledger events", len(seen), len(want))
	}
}

// natsPath is a NATS path and the server a test runs it on.
type natsPath struct {
	name, path string
	cfg        brokertest.NATSConfig
}

// servers are the paths the exactly-once tests run on: the pipeline,
// which a stream of one replica takes on any server (here Debian's
// nats-server 2.9.10), atomic batches on the current server (chosen by
// Config.Path, since a single server's streams have one replica), and one
// publish at a time per SKU, a replicated stream's path without atomic
// batches.
var servers = []natsPath{
	{"pipeline on 2.9.10", "pipeline", brokertest.NATSConfig{}},
	{"atomic batches on the current server", "atomic_batch", brokertest.NATSConfig{Current: true}},
	{"per SKU on 2.9.10", "per_sku", brokertest.NATSConfig{}},
}

// waitPath waits until the exporter published, on the path want.
func waitPath(t *testing.T, exp *brokerexport.Exporter, pub *natsexport.Publisher, want string) {
	t.Helper()
	localstacktest.WaitFor(t, "the export on path "+want, 30*time.Second, func() bool { return exp.Status().Err == nil && pub.Path() == want })
}

// onEachPath runs test on each of paths at once, each with a stack and a
// NATS server of its own.
func onEachPath(t *testing.T, paths []natsPath, test func(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, path string)) {
	t.Helper()
	for _, server := range paths {
		t.Run(server.name, func(t *testing.T) {
			t.Parallel()
			test(t, stacktest.New(t), brokertest.StartNATS(t, server.cfg), server.path)
		})
	}
}

// batchPaths are the paths of servers that batch, which the fault tests
// run on; the per-SKU path's order is each SKU's own publishes'.
var batchPaths = servers[:2]

// TestExportsExactlyOnceAcrossLostCursors exports a ledger, then forgets
// every cursor, as a kill -9 between the broker's acknowledgements and
// the cursor writes would, and exports again: the stream still holds each
// event exactly once, and the cursors catch up from what it holds. On
// both paths.
func TestExportsExactlyOnceAcrossLostCursors(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	onEachPath(t, servers, func(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, path string) {
		skus := []string{"phone.x:1", "plain", "a..b"}
		for i := range 40 { // more SKUs than the per-SKU path takes in a batch
			skus = append(skus, fmt.Sprintf("w%d", i))
		}
		sell(t, st, skus[:3], 60)
		for _, sku := range skus[3:] {
			st.SKU(t, sku, 10, 0)
		}
		buyEach(t, st, skus[3:], 0, 10)
		want := 3*61 + 40*11
		st.RunProjector(t)
		stop, exp, pub := runExporter(t, st, n, natsexport.Config{Path: path})
		waitPath(t, exp, pub, path)
		localstacktest.WaitFor(t, "the export", 60*time.Second, func() bool {
			s := exp.Status()
			return s.Err == nil && s.LagEvents == 0 && len(stored(t, n, natsexport.DefaultStream)) == want
		})
		stop()
		if _, err := st.Pool.Exec(context.Background(), `DELETE FROM export_cursors`); err != nil {
			t.Fatal(err)
		}
		sell(t, st, []string{"later"}, 20)
		_, exp, _ = runExporter(t, st, n, natsexport.Config{Path: path})
		localstacktest.WaitFor(t, "the export after the cursors were lost", 60*time.Second, func() bool {
			s := exp.Status()
			return s.Err == nil && s.LagEvents == 0 && len(stored(t, n, natsexport.DefaultStream)) >= want+21
		})
		checkExactlyOnce(t, st, stored(t, n, natsexport.DefaultStream), append(skus, "later"), brokerexport.DefaultPrefix)
		var cursors int
		if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM export_cursors WHERE broker = 'nats' AND seq > 0`).Scan(&cursors); err != nil {
			t.Fatal(err)
		}
		if cursors != len(skus)+1 {
			t.Fatalf("%d cursors recorded, want %d", cursors, len(skus)+1)
		}
	})
}

// TestAnotherWriterStopsOnlyItsSKU: while the export runs, another writer
// publishes a message without invledger's headers to one SKU's subject.
// The next batch, whose expectations it broke (the SKU's on the atomic
// path; every predicted sequence after it on the pipeline), is refused;
// the export reads the SKUs again, leaves that one out with an error
// naming it, and exports every other SKU once and in order, storing
// nothing of the stopped SKU after the foreign message. On the pipeline
// and atomic batches.
func TestAnotherWriterStopsOnlyItsSKU(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	onEachPath(t, batchPaths, testAnotherWriter)
}

func testAnotherWriter(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, path string) {
	skus := []string{"victim", "ok-1", "ok-2", "ok-3"}
	for _, sku := range skus {
		st.SKU(t, sku, 100, 0)
	}
	buyEach(t, st, skus, 0, 20)
	st.RunProjector(t)
	_, exp, pub := runExporter(t, st, n, natsexport.Config{Path: path})
	waitPath(t, exp, pub, path)
	localstacktest.WaitFor(t, "the first export", 30*time.Second, func() bool {
		return len(stored(t, n, natsexport.DefaultStream)) == 4*21 && exp.Status().Err == nil
	})
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(pub.Subject("victim"), []byte("not invledger's")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	buyEach(t, st, skus, 20, 10)
	var (
		got  error
		held int
	)
	defer func() {
		if t.Failed() {
			t.Logf("the stream holds %d messages, want %d; the export reports %v", held, 4*21+1+3*10, got)
		}
	}()
	localstacktest.WaitFor(t, "the other SKUs exported, the victim stopped", 30*time.Second, func() bool {
		got, held = exp.Status().Err, len(stored(t, n, natsexport.DefaultStream))
		return held == 4*21+1+3*10 && errors.Is(got, brokerexport.ErrConflict)
	})
	if !strings.Contains(got.Error(), pub.Subject("victim")) {
		t.Fatalf("the export's error does not name the victim's subject: %v", got)
	}
	time.Sleep(300 * time.Millisecond) // three more polls: the victim stays out
	var others, victim []storedMsg
	for _, m := range stored(t, n, natsexport.DefaultStream) {
		if m.subject == pub.Subject("victim") {
			victim = append(victim, m)
		} else {
			others = append(others, m)
		}
	}
	checkExactlyOnce(t, st, others, skus[1:], brokerexport.DefaultPrefix)
	if len(victim) != 22 || victim[21].id != "" || victim[20].seq != 21 {
		t.Fatalf("the victim's subject holds %d messages, want its 21 events then the foreign message, and nothing after it", len(victim))
	}
}

// buyEach buys n more units of each of skus, users from on, the SKUs'
// purchases concurrent.
func buyEach(t *testing.T, st *stacktest.Stack, skus []string, from, n int) {
	t.Helper()
	if err := buyEachErr(st, skus, from, n); err != nil {
		t.Fatal(err)
	}
}

// buyEachErr is buyEach for a goroutine of its own, which may not end the test.
func buyEachErr(st *stacktest.Stack, skus []string, from, n int) error {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(skus))
	for _, sku := range skus {
		wg.Go(func() {
			for i := from; i < from+n; i++ {
				cmd, err := ledger.NewDeductCommand(sku, fmt.Sprintf("u%d", i), 1, fmt.Sprintf("r-%s-%d", sku, i))
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
	return <-errs
}

// TestExportsExactlyOnceAcrossBrokerFaults: a sale of 10 SKUs goes on
// while the export runs, and the NATS server is restarted, then frozen
// (SIGSTOP) for a second, mid-export: the stream holds every event once,
// in seq order per SKU, on the pipeline and atomic batches.
func TestExportsExactlyOnceAcrossBrokerFaults(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	onEachPath(t, batchPaths, func(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, path string) {
		skus := make([]string, 10)
		for i := range skus {
			skus[i] = fmt.Sprintf("f%d", i)
			st.SKU(t, skus[i], 200, 0)
		}
		st.RunProjector(t)
		_, exp, pub := runExporter(t, st, n, natsexport.Config{Path: path, Timeout: time.Second})
		waitPath(t, exp, pub, path)
		sold := make(chan error, 1)
		go func() { sold <- buyEachErr(st, skus, 0, 200) }()
		holds := func(atLeast int) func() bool {
			return func() bool { return brokertest.StreamCount(n.URL(), natsexport.DefaultStream) >= atLeast }
		}
		localstacktest.WaitFor(t, "300 events exported", 30*time.Second, holds(300))
		n.Stop()
		n.Start()
		localstacktest.WaitFor(t, "1,000 events exported", 30*time.Second, holds(1000))
		n.Freeze()
		time.Sleep(time.Second)
		n.Thaw()
		if err := <-sold; err != nil {
			t.Fatal(err)
		}
		want := len(skus) * 201
		localstacktest.WaitFor(t, "the whole sale exported", 60*time.Second, func() bool {
			return exp.Status().LagEvents == 0 && holds(want)()
		})
		checkExactlyOnce(t, st, stored(t, n, natsexport.DefaultStream), skus, brokerexport.DefaultPrefix)
	})
}

// TestExportsExactlyOnceAcrossAKill: an exporter process is killed with
// -9 in the middle of an 8,000-event backlog over 16 SKUs, and another
// exporter goes on from the cursors it left: the stream holds every
// event once, in seq order per SKU, on every path. (TestBrokerExport in
// the server package kills serve's export component the same way, on the
// path its stream takes.)
func TestExportsExactlyOnceAcrossAKill(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	onEachPath(t, servers, func(t *testing.T, st *stacktest.Stack, n *brokertest.NATS, path string) {
		const events, skuCount = 8_000, 16
		exporttest.WriteBacklog(t, st.Pool, events, skuCount)
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envChildDatabase+"="+st.DatabaseURL, envChildNATS+"="+n.URL(), envChildPath+"="+path)
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		localstacktest.WaitFor(t, "the exporter process midway", 60*time.Second, func() bool {
			return brokertest.StreamCount(n.URL(), natsexport.DefaultStream) >= events/8
		})
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()
		if held := brokertest.StreamCount(n.URL(), natsexport.DefaultStream); held >= events {
			t.Fatalf("the stream held all %d events when the exporter was killed: the kill was not midway", held)
		}
		_, exp, _ := runExporter(t, st, n, natsexport.Config{Path: path})
		localstacktest.WaitFor(t, "the rest exported", 60*time.Second, func() bool {
			return exp.Status().Err == nil && exp.Status().LagEvents == 0 && brokertest.StreamCount(n.URL(), natsexport.DefaultStream) >= events
		})
		skus := make([]string, skuCount)
		for i := range skus {
			skus[i] = exporttest.SKU(i)
		}
		checkExactlyOnce(t, st, stored(t, n, natsexport.DefaultStream), skus, brokerexport.DefaultPrefix)
	})
}

// TestAServerDownIsReportedWhileNothingWaits: with everything exported,
// a NATS server that stops is reported at once, and one that is frozen
// (SIGSTOP, its socket open) within the client's pings; each is cleared
// once the server is back.
func TestAServerDownIsReportedWhileNothingWaits(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	st := stacktest.New(t)
	n := brokertest.StartNATS(t, brokertest.NATSConfig{})
	sell(t, st, []string{"idle"}, 3)
	st.RunProjector(t)
	_, exp, _ := runExporter(t, st, n, natsexport.Config{})
	status := func(failing bool) func() bool {
		return func() bool { s := exp.Status(); return s.LagEvents == 0 && (s.Err != nil) == failing }
	}
	localstacktest.WaitFor(t, "the export done", 30*time.Second, status(false))
	n.Stop()
	localstacktest.WaitFor(t, "a stopped server reported", 10*time.Second, status(true))
	n.Start()
	localstacktest.WaitFor(t, "the server back", 30*time.Second, status(false))
	n.Freeze()
	localstacktest.WaitFor(t, "a frozen server reported", 15*time.Second, status(true))
	n.Thaw()
	localstacktest.WaitFor(t, "the server thawed", 30*time.Second, status(false))
}

// TestRefusingBrokerNamesTheSetting: bad credentials, a missing stream
// and a full store are each reported naming the setting to fix.
func TestRefusingBrokerNamesTheSetting(t *testing.T) {
	localstacktest.SkipShort(t)
	t.Parallel()
	st := stacktest.New(t)
	sell(t, st, []string{"s1"}, 300)
	st.RunProjector(t)
	cases := []struct {
		name    string
		nats    brokertest.NATSConfig
		cfg     func(url string) natsexport.Config
		setting string
		prepare func(t *testing.T, url string)
	}{
		{"bad credentials", brokertest.NATSConfig{User: "invledger", Password: "right"},
			func(url string) natsexport.Config {
				return natsexport.Config{URL: strings.Replace(url, ":right@", ":wrong@", 1)}
			}, brokerexport.SettingNATSURL, nil},
		{"missing stream", brokertest.NATSConfig{},
			func(url string) natsexport.Config { return natsexport.Config{URL: url, CheckStreamOnly: true} }, brokerexport.SettingNATSStream, nil},
		{"store full", brokertest.NATSConfig{MaxFileStore: 64 << 10},
			func(url string) natsexport.Config { return natsexport.Config{URL: url} }, brokerexport.SettingNATSStream, nil},
		{"another ledger's stream", brokertest.NATSConfig{},
			func(url string) natsexport.Config { return natsexport.Config{URL: url} }, brokerexport.SettingNATSStream,
			func(t *testing.T, url string) {
				// s1 up to seq 400 from a ledger that is gone; this one ends at 301.
				pub, err := natsexport.New(natsexport.Config{URL: url, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				defer pub.Close()
				if err := pub.Connect(context.Background()); err != nil {
					t.Fatal(err)
				}
				msgs := make([]brokerexport.Message, 400)
				for i := range msgs {
					msgs[i] = brokerexport.Message{EventID: uuid.NewString(), SKU: "s1", Seq: int64(i + 1), Body: []byte("{}")}
				}
				for _, o := range pub.Publish(context.Background(), []brokerexport.Run{{SKU: "s1", Msgs: msgs}}) {
					if o.Err != nil || o.UpTo != 400 {
						t.Fatalf("published s1 up to %d of 400: %v", o.UpTo, o.Err)
					}
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := brokertest.StartNATS(t, c.nats)
			if c.prepare != nil {
				c.prepare(t, n.URL())
			}
			stop, exp, _ := runExporter(t, st, n, c.cfg(n.URL()))
			defer stop()
			var got error
			localstacktest.WaitFor(t, "the refusal", 30*time.Second, func() bool {
				var se *brokerexport.SettingError
				got = exp.Status().Err
				return errors.As(got, &se) && se.Setting == c.setting
			})
			if strings.Contains(got.Error(), "wrong") || strings.Contains(got.Error(), "right") {
				t.Fatalf("the refusal shows the password: %v", got)
			}
			t.Logf("reported: %v", got)
		})
	}
}
