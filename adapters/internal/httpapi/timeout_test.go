package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyReadTimeoutIs408WithoutAddresses stalls a deduct body past the
// server's ReadTimeout: the answer is 408 request_timeout, and its body
// names no socket address.
func TestBodyReadTimeoutIs408WithoutAddresses(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(newStubHandler(t, Config{}))
	srv.Config.ReadTimeout = 300 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	head := "POST /v1/skus/tmo/deduct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secretGateway +
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
	if _, err := io.WriteString(conn, head+`{"user_id":"u1",`); err != nil { // then stall
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, body: body}
	expectError(t, r, http.StatusRequestTimeout, "request_timeout")
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	if strings.Contains(string(body), host) || strings.Contains(string(body), port) || strings.Contains(string(body), "tcp") {
		t.Fatalf("body shows socket details: %s", body)
	}
}
