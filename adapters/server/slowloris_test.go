package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/adapters/testkit/stacktest"
)

// slowloris is an attack: connections that send the first byte of a
// request and nothing more, each opened again at once when the server
// closes it.
type slowloris struct {
	opened atomic.Int64 // connections opened, replacements included
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   map[net.Conn]struct{}
	once   sync.Once
}

// startSlowloris keeps n such connections from each of locals to addr
// until the test ends, and returns once each has been opened: the server
// accepts a request sent after them once it has accepted them.
func startSlowloris(t *testing.T, addr string, locals []string, n int) *slowloris {
	t.Helper()
	a := &slowloris{done: make(chan struct{}), open: map[net.Conn]struct{}{}}
	t.Cleanup(a.stop)
	for _, local := range locals {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
		for range n {
			a.wg.Go(func() {
				for a.running() {
					if conn, err := d.Dial("tcp", addr); err == nil {
						a.hold(conn)
					}
				}
			})
		}
	}
	total := int64(len(locals) * n)
	localstacktest.WaitFor(t, fmt.Sprintf("%d slowloris connections open", total), 20*time.Second, func() bool { return a.opened.Load() >= total })
	return a
}

func (a *slowloris) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// hold sends conn one byte and waits until the server closes it or the
// attack stops (the deadline only bounds a wait nothing else ends).
func (a *slowloris) hold(conn net.Conn) {
	a.mu.Lock()
	if !a.running() {
		a.mu.Unlock()
		conn.Close()
		return
	}
	a.open[conn] = struct{}{}
	a.mu.Unlock()
	a.opened.Add(1)
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, "P"); err == nil {
		_, _ = io.Copy(io.Discard, conn)
	}
	a.mu.Lock()
	delete(a.open, conn)
	a.mu.Unlock()
	conn.Close()
}

// stop ends the attack and closes its connections.
func (a *slowloris) stop() {
	a.once.Do(func() {
		a.mu.Lock()
		close(a.done)
		for c := range a.open {
			c.Close()
		}
		a.mu.Unlock()
		a.wg.Wait()
	})
}

// purchaseRequest is a whole purchase of one sku-1 by buyer.
func purchaseRequest(buyer string) string {
	body := fmt.Sprintf(`{"user_id":%q,"qty":1,"request_id":%q}`, buyer, "r-"+buyer)
	return fmt.Sprintf("POST /v1/skus/sku-1/deduct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", secretGateway, len(body), body)
}

// requireAnswered sends n of each request from each of locals, one
// connection each, one after another for a kind and an address, every
// kind and address at once, and fails unless every one is answered want.
func requireAnswered(t *testing.T, addr string, locals []string, n, want int, requests map[string]func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, local := range locals {
		for name, request := range requests {
			wg.Go(func() {
				failed, answers := 0, map[string]int{}
				for i := range n {
					answer := "no answer"
					if status, _, err := requestFrom(addr, local, request(i)); err == nil {
						answer = fmt.Sprint(status)
					}
					answers[answer]++
					if answer != fmt.Sprint(want) {
						failed++
					}
				}
				if failed > 0 {
					t.Errorf("%d of %d %s from %s not answered %d: answers %v", failed, n, name, local, want, answers)
				}
			})
		}
	}
	wg.Wait()
}

// purchases is n purchases by buyers of their own.
func purchases(prefix string) map[string]func(int) string {
	return map[string]func(int) string{"purchases": func(i int) string { return purchaseRequest(fmt.Sprintf("%s-%d", prefix, i)) }}
}

// probes are GET /healthz and GET /readyz, as a kubelet sends them.
var probes = map[string]func(int) string{
	"/healthz probes": func(int) string { return "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" },
	"/readyz probes":  func(int) string { return "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n" },
}

// TestHeaderSlowloris: connections that send one byte of their headers,
// each opened again at once when closed, keep no purchase or probe out: a
// connection is evictable until its headers are complete. The subtests
// share one stack and run one after another, each against its own serve.
func TestHeaderSlowloris(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	st.SKU(t, "sku-1", 100, 1)
	// 70 from one address, against --max-conns 64: purchases from that
	// address and from another are served.
	t.Run("one address", func(t *testing.T) {
		addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 64}), "http://")
		startSlowloris(t, addr, []string{"127.0.0.1"}, 70)
		requireAnswered(t, addr, []string{"127.0.0.2", "127.0.0.1"}, 10, 200, purchases("one"))
	})
	// 9 from each of 8 addresses, against --max-conns 64 and
	// --max-conns-per-client 8: purchases from a ninth are served.
	t.Run("eight addresses", func(t *testing.T) {
		addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 64, MaxConnsPerClient: 8}), "http://")
		var attackers []string
		for i := range 8 {
			attackers = append(attackers, fmt.Sprintf("127.0.0.%d", 110+i))
		}
		startSlowloris(t, addr, attackers, 9)
		requireAnswered(t, addr, []string{"127.0.0.2"}, 10, 200, purchases("eight"))
	})
	// 1,100 from one address, over the default --max-conns of 1,024:
	// purchases and health probes from another are answered.
	t.Run("the default cap", func(t *testing.T) {
		addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens}), "http://")
		startSlowloris(t, addr, []string{"127.0.0.1"}, DefaultMaxConns+76)
		requireAnswered(t, addr, []string{"127.0.0.2"}, 5, 200, map[string]func(int) string{
			"purchases": purchases("default")["purchases"], "/healthz probes": probes["/healthz probes"], "/readyz probes": probes["/readyz probes"]})
	})
}

// TestHealthProbesWhileTheOverflowRefuses: with --max-conns 16 busy with
// purchases (Redis paused) and 100 more slowloris connections from their
// address filling the refusals, /healthz and /readyz from another address
// are still answered 200.
func TestHealthProbesWhileTheOverflowRefuses(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	st.SKU(t, "sku-1", 100, 1)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 16}), "http://")
	ctx := context.Background()
	// Purchases wait for Redis's writes, busy in their handlers, until
	// the test ends.
	if err := st.RedisClient.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.RedisClient.Do(ctx, "CLIENT", "UNPAUSE").Err() })
	for i := range 16 {
		conn := dialFrom(t, addr, "127.0.0.1")
		head, body, _ := strings.Cut(purchaseRequest(fmt.Sprintf("busy-%d", i)), "\r\n\r\n")
		untilHandled(t, conn, head)
		writeTo(t, conn, body)
	}
	if status, _ := getFrom(t, addr, "127.0.0.4", "/v1/skus", secretAuditor); status != 503 {
		t.Fatalf("with 16 purchases busy a request = %d, want 503", status)
	}
	startSlowloris(t, addr, []string{"127.0.0.1"}, 100)
	requireAnswered(t, addr, []string{"127.0.0.3"}, 5, 200, probes)
}

// TestFullAPIGivesASlowBodyASecond: a gateway's bodies that do not come,
// on --max-conns 2 with a body timeout of a minute, are answered 408 and
// their connections closed soon after a newcomer finds the API full: a
// full API gives a request being read a second, not the body timeout.
func TestFullAPIGivesASlowBodyASecond(t *testing.T) {
	t.Parallel()
	st := stacktest.New(t)
	addr := strings.TrimPrefix(startServe(t, st, Config{Tokens: testTokens, MaxConns: 2, BodyTimeout: time.Minute}), "http://")
	held := []net.Conn{dialFrom(t, addr, "127.0.0.1"), dialFrom(t, addr, "127.0.0.1")}
	for _, conn := range held {
		holdBusy(t, conn)
	}
	if status, _ := getFrom(t, addr, "127.0.0.2", "/v1/skus", secretAuditor); status != 503 {
		t.Fatalf("with 2 slow bodies a request = %d, want 503", status)
	}
	for i, conn := range held {
		if status := statusThenClose(t, conn); status != http.StatusRequestTimeout {
			t.Fatalf("slow body %d on a full API = %d, want 408", i+1, status)
		}
	}
}
