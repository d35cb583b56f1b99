package bench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestFastHTTP runs the hand-written client against net/http's server:
// requests arrive whole, connections are kept alive unless the server
// closes them, and answers are read by their Content-Length.
func TestFastHTTP(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.EscapedPath() != "/v1/skus/a%2Fb/deduct" ||
			r.Header.Get("Authorization") != "Bearer gw" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad request", http.StatusTeapot)
			return
		}
		switch string(body) {
		case "close":
			w.Header().Set("Connection", "close")
		case "chunked":
			w.Header().Set("Transfer-Encoding", "chunked")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(`{"seq":1}`))
			return
		case "slow":
			time.Sleep(time.Second)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(append([]byte(`{"error":"sold_out","echo":"`), append(body, `"}`...)...))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h := newFastHTTP(u.Host, "/v1/skus/a%2Fb/deduct", "Bearer gw")
	w := &benchWorker{}
	defer func() {
		if w.conn != nil {
			_ = w.conn.Close()
		}
	}()
	ctx := context.Background()

	for i := range 3 {
		body := "b" + strconv.Itoa(i)
		status, resp, err := h.post(ctx, w, []byte(body))
		if err != nil || status != http.StatusConflict || string(resp) != `{"error":"sold_out","echo":"`+body+`"}` {
			t.Fatalf("post %d: %d %q %v", i, status, resp, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 3 requests, want 1 kept alive", n)
	}
	if _, _, err := h.post(ctx, w, []byte("close")); err != nil || w.conn != nil {
		t.Fatalf("Connection: close: err %v, connection kept: %v", err, w.conn != nil)
	}
	if _, _, err := h.post(ctx, w, []byte("again")); err != nil || conns.Load() != 2 {
		t.Fatalf("after a close: err %v, %d connections, want a second one", err, conns.Load())
	}
	if _, _, err := h.post(ctx, w, []byte("chunked")); err == nil || w.conn != nil {
		t.Fatalf("a chunked answer: err %v, want an error and the connection dropped", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := h.post(tctx, w, []byte("slow")); !isTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a slow answer past the deadline: %v, want a timeout", err)
	}
	cctx, cancelNow := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancelNow)
	if _, _, err := h.post(cctx, w, []byte("slow")); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v, want context.Canceled", err)
	}
}

func TestNewFastHTTPAddsThePort(t *testing.T) {
	if h := newFastHTTP("example.test", "/", "Bearer x"); h.addr != "example.test:80" {
		t.Errorf("addr = %q, want example.test:80", h.addr)
	}
	if h := newFastHTTP("127.0.0.1:8080", "/", "Bearer x"); h.addr != "127.0.0.1:8080" {
		t.Errorf("addr = %q", h.addr)
	}
}

func TestDeductOutcome(t *testing.T) {
	for _, tc := range []struct {
		status  int
		body    string
		want    outcome
		seq     int64
		wantErr bool
	}{
		{200, `{"status":"ok","seq":42,"remaining":7}`, outOK, 42, false},
		{200, `{"status":"ok"}`, outError, 0, true},
		{409, `{"error":"sold_out","detail":"x"}`, outSoldOut, 0, false},
		{409, `{"error":"already_purchased"}`, outAlready, 0, false},
		{409, `{"error":"not_warmed"}`, outNotWarmed, 0, true},
		{409, `{"error":"closed"}`, outClosed, 0, true},
		{409, `{"error":"conflict"}`, outConflict, 0, true},
		{503, `{"error":"recovering"}`, outRecovering, 0, true},
		{400, `{"error":"invalid_request"}`, outInvalid, 0, true},
		{409, `{"error":"needs_restore"}`, outError, 0, true},
		{500, `{"error":"sold_out"}`, outError, 0, true},
	} {
		o, seq, err := deductOutcome(tc.status, []byte(tc.body))
		if o != tc.want || seq != tc.seq || (err != nil) != tc.wantErr {
			t.Errorf("%d %s: %s %d %v, want %s %d error %v", tc.status, tc.body, o, seq, err, tc.want, tc.seq, tc.wantErr)
		}
	}
}

func TestCodeOutcome(t *testing.T) {
	for code, want := range map[string]outcome{"sold_out": outSoldOut, "already_purchased": outAlready, "recovering": outRecovering,
		"invalid_request": outInvalid, "not_found": outError, "ok": outError, "sold": outError, "": outError} {
		if got := codeOutcome(code); got != want {
			t.Errorf("codeOutcome(%q) = %s, want %s", code, got, want)
		}
	}
}
