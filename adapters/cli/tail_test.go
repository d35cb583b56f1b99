package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/stacktest"
	"github.com/invledger/invledger/adapters/wire"
	"github.com/invledger/invledger/ledger"
	"github.com/invledger/invledger/projections/streamentry"
)

// lockedBuffer is a bytes.Buffer a command writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// startTail runs `invledger tail` with args against s's Redis until the
// returned stop is called; stop fails the test unless tail returned nil
// within 5s (graceful on SIGINT: the command's context ends).
func startTail(t *testing.T, s *stacktest.Stack, args ...string) (out *lockedBuffer, stop func()) {
	t.Helper()
	out = &lockedBuffer{}
	cmd := NewRootCmd()
	cmd.SetArgs(append([]string{"tail", "--redis-url", s.Redis.URL(), "--log-level", "error"}, args...))
	cmd.SetOut(out)
	cmd.SetErr(out)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return out, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tail: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("tail did not return within 5s of its context ending")
		}
	}
}

// waitLines waits until out holds n lines.
func waitLines(t *testing.T, out *lockedBuffer, n int) []string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(out.lines()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("tail printed %d lines in 15s, want %d:\n%s", len(out.lines()), n, strings.Join(out.lines(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return out.lines()
}

func TestTailFollowsOneSKUsEvents(t *testing.T) {
	t.Parallel()
	s := stacktest.New(t)
	ctx := context.Background()
	const sku = "tail-1"
	s.SKU(t, sku, 100, 1)
	s.SKU(t, "tail-2", 100, 1) // another SKU, whose events tail never prints
	buy := func(sku, user string) {
		t.Helper()
		if _, err := s.Service.Deduct(ctx, ledger.MustDeductCommand(sku, user, 1, "r-"+user)); err != nil {
			t.Fatal(err)
		}
	}
	buy(sku, "before")

	out, stop := startTail(t, s, "--sku", sku, "--format", "json")
	// tail follows what is appended once its first XREAD waits.
	waitFor := time.Now().Add(10 * time.Second)
	for {
		list, err := s.RedisClient.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(list, "cmd=xread ") {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("tail is not reading after 10s:\n%s", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 3 {
		buy("tail-2", fmt.Sprint("other", i))
		buy(sku, fmt.Sprint("live", i))
	}
	waitLines(t, out, 3)
	time.Sleep(200 * time.Millisecond) // nothing more may come
	stop()
	lines := out.lines()
	if len(lines) != 3 {
		t.Fatalf("tail printed %d lines, want the 3 live purchases:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	at := eventTimes(t, s, sku)
	for i, line := range lines {
		var e wire.EventJSON
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if e.SKU != sku || e.Type != "deducted" || e.UserID != fmt.Sprint("live", i) || e.Seq != int64(i+3) || e.BalanceAfter != int64(100-2-i) {
			t.Fatalf("line %d: %+v, want live%d's purchase, seq %d", i, e, i, i+3)
		}
		if !e.OccurredAt.Equal(at[e.Seq]) {
			t.Errorf("line %d: occurred_at %s, want its stream entry's time %s", i, e.OccurredAt, at[e.Seq])
		}
	}

	// --from-start prints what the stream holds first: stocked, then the
	// four purchases.
	out, stop = startTail(t, s, "--sku", sku, "--from-start")
	lines = waitLines(t, out, 5)
	stop()
	if len(lines) != 5 {
		t.Fatalf("--from-start printed %d lines, want 5:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, want := range []string{" stocked seq=1 ", ` deducted seq=2 delta=-1 balance=99 user="before" `, " seq=3 ", " seq=4 ",
		` deducted seq=5 delta=-1 balance=96 user="live2" `} {
		if !strings.Contains(lines[i], want) {
			t.Fatalf("line %d %q does not say %q", i, lines[i], want)
		}
		if when := at[int64(i+1)].Format(time.RFC3339Nano) + " "; !strings.HasPrefix(lines[i], when) {
			t.Errorf("line %d %q does not start with its stream entry's time %s", i, lines[i], when)
		}
	}
}

// eventTimes maps each seq of sku's events in its partition stream to its
// time, its entry's stream id.
func eventTimes(t *testing.T, s *stacktest.Stack, sku string) map[int64]time.Time {
	t.Helper()
	entries, err := s.RedisClient.XRange(context.Background(), s.Keyspace.SKUStreamKey(sku), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	at := map[int64]time.Time{}
	for _, m := range entries {
		events, err := streamentry.ParseEntryEvents(streamentry.MessageFields(m))
		if err != nil {
			t.Fatal(err)
		}
		for _, ee := range events {
			if ee.Event.SKU == sku {
				at[ee.Event.Seq] = ee.Event.OccurredAt
			}
		}
	}
	return at
}

func TestTailRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tail"}, `"sku" not set`},
		{[]string{"tail", "--sku", "a b"}, "--sku"},
		{[]string{"tail", "--sku", "ok", "--format", "yaml"}, "--format"},
	} {
		// A Redis that is not there: a bad argument is refused before any read.
		_, err := run(t, append(tc.args, "--redis-url", "redis://127.0.0.1:1/0")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}
