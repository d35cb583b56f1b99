package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyDeadlineEndsWithTheBody: once a body is read, the body's short
// deadline no longer applies: a handler that works past it (a purchase
// waiting on Redis) keeps its context, and its connection stays open for
// the next request.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 100 * time.Millisecond
	srv := httptest.NewUnstartedServer(guardBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "context ended after the body was read: "+context.Cause(r.Context()).Error(), http.StatusInternalServerError)
		case <-time.After(3 * bodyTimeout):
			_, _ = io.WriteString(w, "ok")
		}
	}), bodyTimeout))
	srv.Config.ReadTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	client := srv.Client()
	for i := range 2 {
		resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"qty":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("request %d: %d %s (Connection: %q), want 200 on a connection kept open", i+1, resp.StatusCode, b, resp.Header.Get("Connection"))
		}
	}
}

// BenchmarkBodyGuard is what guardBodies adds to a purchase-sized POST on a
// keep-alive loopback connection: compare its two sub-benchmarks, measured
// in the same run.
func BenchmarkBodyGuard(b *testing.B) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	const body = `{"user_id":"user-42","qty":1,"request_id":"req-00000000000000000001"}`
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"plain", read}, {"guarded", guardBodies(read, DefaultBodyTimeout)}} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			client := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(srv.URL, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || resp.Close {
					b.Fatalf("status %d, close %v: a read body must keep its connection", resp.StatusCode, resp.Close)
				}
			}
		})
	}
}
