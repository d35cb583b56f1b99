package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// TestIdleServeHoldsFewRedisConnections counts, with CLIENT LIST on a
// private Redis, the connections of an idle serve running its default
// components (api, projector, reconciler): at most 40. Managed Redis plans
// cap connections, and every serve process adds its own.
func TestIdleServeHoldsFewRedisConnections(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	st.SKU(t, "idle-1", 10, 1)
	startServe(t, st, Config{Components: Components(), Tokens: testTokens})
	ctx := context.Background()
	streams := len(st.Keyspace.StreamKeys())
	// Idle: every stream has a blocked read, the reconciler's first run and
	// the node runs polls are done.
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := st.RedisClient.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(list, "cmd=xreadgroup") >= streams {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projector's reads are not all blocked after 20s:\n%s", list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	list, err := st.RedisClient.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	clients := strings.Split(strings.TrimSpace(list), "\n")
	byCmd := map[string]int{}
	for _, c := range clients {
		for _, f := range strings.Fields(c) {
			if cmd, ok := strings.CutPrefix(f, "cmd="); ok {
				byCmd[cmd]++
			}
		}
	}
	var summary []string
	for cmd, n := range byCmd {
		summary = append(summary, fmt.Sprintf("%s=%d", cmd, n))
	}
	sort.Strings(summary)
	t.Logf("%d Redis connections, by last command: %s", len(clients), strings.Join(summary, " "))
	if len(clients) > 40 {
		t.Fatalf("an idle serve holds %d Redis connections (the test's own included), want at most 40; by last command: %s",
			len(clients), strings.Join(summary, " "))
	}
}

// dialFrom connects to addr from the loopback address local (any of
// 127.0.0.0/8 on Linux), so one test can be several clients.
func dialFrom(t *testing.T, addr, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// holdBusy sends conn a deduct whose body never comes, and returns once
// its handler runs: the connection is busy with a request until the
// server's body timeout (the tests that hold connections so set it longer
// than themselves), or a second once the API is full.
func holdBusy(t *testing.T, conn net.Conn) {
	t.Helper()
	untilHandled(t, conn, "POST /v1/skus/busy-1/deduct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+secretGateway+
		"\r\nContent-Type: application/json\r\nContent-Length: 100")
	writeTo(t, conn, "{")
}

// untilHandled sends head, a request's headers without their blank line,
// asking with Expect: 100-continue for leave to send the body, and returns
// once it is given: the server asks when the handler reads the body, so
// the connection is busy, no longer evictable.
func untilHandled(t *testing.T, conn net.Conn, head string) {
	t.Helper()
	writeTo(t, conn, head+"\r\nExpect: 100-continue\r\n\r\n")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("waiting for 100 Continue: %v", err)
	}
	if resp.StatusCode != http.StatusContinue {
		t.Fatalf("%s answered %d, want 100 Continue", strings.SplitN(head, "\r\n", 2)[0], resp.StatusCode)
	}
	_ = conn.SetReadDeadline(time.Time{})
}

// getFrom sends GET path from local on a new connection and returns the
// status and Retry-After.
func getFrom(t *testing.T, addr, local, path, secret string) (int, string) {
	t.Helper()
	auth := ""
	if secret != "" {
		auth = "Authorization: Bearer " + secret + "\r\n"
	}
	status, retry, err := requestFrom(addr, local, "GET "+path+" HTTP/1.1\r\nHost: x\r\n"+auth+"\r\n")
	if err != nil {
		t.Fatalf("GET %s from %s: %v", path, local, err)
	}
	return status, retry
}

// requestFrom sends raw, a whole request, from local on a new connection
// and returns the answer's status and Retry-After, or the error for none.
func requestFrom(addr, local, raw string) (int, string, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// TestConnectionCapPerClientAddress: with --max-conns 16 and
// --max-conns-per-client 4 (off by default), a client busy on 4
// connections is refused a fifth at once (503, Retry-After), while another
// address is served.
func TestConnectionCapPerClientAddress(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 16, MaxConnsPerClient: 4, BodyTimeout: time.Minute}), "http://")
	for range 4 {
		holdBusy(t, dialFrom(t, addr, "127.0.0.1"))
	}
	start := time.Now()
	if status, retry := getFrom(t, addr, "127.0.0.1", "/v1/skus", secretAuditor); status != 503 || retry == "" {
		t.Fatalf("a fifth connection from a client busy on four = %d (Retry-After %q), want 503 with Retry-After", status, retry)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("the refusal took %v; it must not queue", waited)
	}
	if status, _ := getFrom(t, addr, "127.0.0.2", "/v1/skus", secretAuditor); status != 200 {
		t.Fatalf("another client address meanwhile = %d, want 200", status)
	}
}

// TestFullAPIStillServesHealthAndNewClients: --max-conns 16 idle
// keep-alive connections (from 8 addresses, 2 each) do not keep a new
// client out: the longest idle is closed to make room. 16 busy ones do:
// the next request is refused 503 with Retry-After, but /healthz and
// /readyz are still answered.
func TestFullAPIStillServesHealthAndNewClients(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 16, BodyTimeout: time.Minute}), "http://")
	var idle []net.Conn
	for i := range 16 {
		conn := dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 10+i/2))
		if resp := rawGet(t, conn, bufio.NewReader(conn), "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("healthz: %d", resp.StatusCode)
		}
		idle = append(idle, conn)
	}
	if status, _ := getFrom(t, addr, "127.0.0.1", "/v1/skus", secretAuditor); status != 200 {
		t.Fatalf("a new client with 16 idle connections holding every place = %d, want 200", status)
	}
	_ = idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the longest-idle connection is still open")
	}
	for _, c := range idle {
		c.Close()
	}

	for i := range 16 {
		holdBusy(t, dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 30+i/2)))
	}
	// The idle connections' slots come back as the server sees them close.
	last := -1
	localstacktest.WaitFor(t, "with 16 busy connections a request answered 503 with Retry-After", 5*time.Second, func() bool {
		status, retry := getFrom(t, addr, "127.0.0.1", "/v1/skus", secretAuditor)
		if status != last {
			t.Logf("with 16 busy connections a request = %d (Retry-After %q)", status, retry)
			last = status
		}
		return status == 503 && retry != ""
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, _ := getFrom(t, addr, "127.0.0.1", path, ""); status != 200 {
			t.Fatalf("%s with every connection busy = %d, want 200", path, status)
		}
	}
}

// TestBusyGatewayIsServedUnderDefaultSettings: a gateway's 200 keep-alive
// connections from one address, all busy with a purchase at once, are all
// served under the default connection caps: no 503, no connection
// closed. The per-client cap is off by default. (The body timeout is
// raised only so that a loaded machine cannot turn the held bodies into
// 408s.)
func TestBusyGatewayIsServedUnderDefaultSettings(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	const n = 200
	st.SKU(t, "gw-1", n, 1)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, BodyTimeout: time.Minute}), "http://")
	conns := make([]net.Conn, n)
	rest := make([]string, n)
	for i := range conns {
		conns[i] = dialFrom(t, addr, "127.0.0.1")
		body := fmt.Sprintf(`{"user_id":"u-%d","qty":1,"request_id":"r-%d"}`, i, i)
		// The headers and the body's first byte: the connection is busy
		// with its request until the rest comes.
		writeTo(t, conns[i], fmt.Sprintf("POST /v1/skus/gw-1/deduct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", secretGateway, len(body), body[:1]))
		rest[i] = body[1:]
	}
	for i, conn := range conns {
		// A refused connection is closed; its answer says why.
		_, _ = io.WriteString(conn, rest[i])
	}
	for i, conn := range conns {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("purchase %d of %d busy connections from one address: %v", i+1, n, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("purchase %d of %d busy connections from one address = %d %s (Connection: %q), want 200 on a connection kept open",
				i+1, n, resp.StatusCode, b, resp.Header.Get("Connection"))
		}
	}
}

// TestSilentConnectionsDoNotKeepANewClientOut: --max-conns 16 connections
// that send nothing, from one address or from eight, hold their places
// only until someone else needs one: a new client is served at once in
// place of one of them.
func TestSilentConnectionsDoNotKeepANewClientOut(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	for _, addrs := range []int{1, 8} {
		t.Run(fmt.Sprintf("from %d addresses", addrs), func(t *testing.T) {
			t.Parallel()
			addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 16}), "http://")
			var silent []net.Conn
			for i := range 16 {
				silent = append(silent, dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 70+10*addrs+i%addrs)))
			}
			if status, retry := getFrom(t, addr, "127.0.0.2", "/v1/skus", secretAuditor); status != 200 {
				t.Fatalf("a new client with 16 silent connections holding every place = %d (Retry-After %q), want 200", status, retry)
			}
			if n := closedCount(silent); n != 1 {
				t.Fatalf("%d silent connections closed to admit a new client, want 1", n)
			}
		})
	}
}

// TestFullAPIEvictsFromTheAddressHoldingTheMost: with --max-conns 16 held
// by idle connections, 6 from one address (idle the longest) and 10 from
// another, a new client is admitted by closing one of the 10, and the 6
// stay open.
func TestFullAPIEvictsFromTheAddressHoldingTheMost(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 16}), "http://")
	idleFrom := func(local string) net.Conn {
		conn := dialFrom(t, addr, local)
		if resp := rawGet(t, conn, bufio.NewReader(conn), "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("healthz: %d", resp.StatusCode)
		}
		return conn
	}
	var few, many []net.Conn
	for range 6 {
		few = append(few, idleFrom("127.0.0.50"))
	}
	for range 10 {
		many = append(many, idleFrom("127.0.0.51"))
	}
	if status, _ := getFrom(t, addr, "127.0.0.52", "/v1/skus", secretAuditor); status != 200 {
		t.Fatalf("a new client with 16 idle connections holding every place = %d, want 200", status)
	}
	// The evicted connection was closed before the new one was served.
	fewClosed, manyClosed := closedCount(few), closedCount(many)
	if fewClosed != 0 || manyClosed != 1 {
		t.Fatalf("closed to admit a new client: %d of the 6 idle the longest, %d of the 10 of the address holding the most; want 0 and 1",
			fewClosed, manyClosed)
	}
}

// closedCount is how many of conns the server has closed; each one is
// waited on for a moment, all at once.
func closedCount(conns []net.Conn) int {
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(closed.Load())
}

// TestSlowBodiesCannotHoldTheAPI: with --max-conns 32, 32 requests
// without a token whose bodies come slowly, from 8 addresses, are each
// answered 401 and their connections closed at once, so a new client is
// served; and a gateway's body that does not come is answered 408 and its
// connection closed well before the 10 s read timeout.
func TestSlowBodiesCannotHoldTheAPI(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 32}), "http://")
	const head = "POST /v1/skus/slow-1/deduct HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
	var conns []net.Conn
	for i := range 32 {
		conn := dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 60+i%8))
		writeTo(t, conn, head+"\r\n{")
		conns = append(conns, conn)
	}
	for i, conn := range conns {
		if status := statusThenClose(t, conn); status != 401 {
			t.Fatalf("slow body %d without a token = %d, want 401", i+1, status)
		}
	}
	if status, retry := getFrom(t, addr, "127.0.0.2", "/v1/skus", secretAuditor); status != 200 {
		t.Fatalf("a new client after 32 slow bodies without a token = %d (Retry-After %q), want 200", status, retry)
	}

	conn := dialFrom(t, addr, "127.0.0.69")
	start := time.Now()
	writeTo(t, conn, head+"Authorization: Bearer "+secretGateway+"\r\n\r\n{")
	if status := statusThenClose(t, conn); status != http.StatusRequestTimeout {
		t.Fatalf("a gateway's body that does not come = %d, want 408", status)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a body that does not come held its connection %v; want well under the 10 s read timeout", took)
	}
}

// statusThenClose reads conn's answer, within 5 s, and requires the server
// to close conn right after it; it returns the answer's status.
func statusThenClose(t *testing.T, conn net.Conn) int {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within 5s: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after %d (Connection: %q) the connection is still open a second later (read: %v)", resp.StatusCode, resp.Header.Get("Connection"), err)
	}
	return resp.StatusCode
}

// writeTo writes s to conn.
func writeTo(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatal(err)
	}
}
