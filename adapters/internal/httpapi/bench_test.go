package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/ledger"
)

// benchParallelism × GOMAXPROCS clients run at once: enough for Redis to
// group its AOF fsyncs, as a flash sale's many clients do.
const benchParallelism = 16

// benchSKU creates and warms a SKU no benchmark can sell out.
func benchSKU(b *testing.B, s *stack, sku string) {
	b.Helper()
	s.mustCreateWarm(b, sku, `{"stock":1000000000,"per_user_limit":1000000000}`)
}

// BenchmarkHTTPDeduct measures POST /v1/skus/{sku}/deduct end to end over
// HTTP/1.1 keep-alive connections against the real Redis. Every iteration is
// a new user and request id, so each one is a real deduction.
//
//	go test -run '^$' -bench Deduct -benchtime=100x ./internal/httpapi/
func BenchmarkHTTPDeduct(b *testing.B) {
	s := newStack(b)
	benchSKU(b, s, "bench-http")
	url := s.srv.URL + "/v1/skus/bench-http/deduct"
	var n atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		body := make([]byte, 0, 128)
		for pb.Next() {
			i := strconv.AppendInt(nil, n.Add(1), 10)
			body = append(body[:0], `{"user_id":"u`...)
			body = append(body, i...)
			body = append(body, `","qty":1,"request_id":"r`...)
			body = append(body, i...)
			body = append(body, `"}`...)
			req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+secretGateway)
			resp, err := s.client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("deduct: status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkServiceDeduct is the baseline for BenchmarkHTTPDeduct: the same
// deductions through the in-process ledger.Service, one Redis round trip each.
func BenchmarkServiceDeduct(b *testing.B) {
	s := newStack(b)
	benchSKU(b, s, "bench-svc")
	var n atomic.Int64
	ctx := context.Background()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := strconv.FormatInt(n.Add(1), 10)
			if _, err := s.svc.Deduct(ctx, ledger.MustDeductCommand("bench-svc", "u"+id, 1, "r"+id)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHandlerDeductPath measures the handler's own cost on the deduct
// path (auth, decode, validation, encoding) without the network or Redis,
// by answering with a fixed receipt: with warnings only logged, and with
// serve's default, an info text log that has every access line.
//
//	go test -run '^$' -bench HandlerDeductPath -benchmem ./internal/httpapi/
func BenchmarkHandlerDeductPath(b *testing.B) {
	b.Run("log=warn", func(b *testing.B) { benchHandlerDeductPath(b, stubbed(b, Config{Ledger: fixedLedger{}})) })
	b.Run("log=info", func(b *testing.B) {
		cfg := stubbed(b, Config{Ledger: fixedLedger{}})
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		benchHandlerDeductPath(b, cfg)
	})
}

func benchHandlerDeductPath(b *testing.B, cfg Config) {
	h, err := NewHandler(cfg)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"user_id":"user-123","qty":1,"request_id":"0190b5a4-7a52-7c3e-9d1b-3f5e6a7b8c9d"}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, "/v1/skus/sku-1/deduct", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+secretGateway)
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
}

// fixedLedger answers every deduction with the same receipt.
type fixedLedger struct{ Ledger }

func (fixedLedger) Deduct(_ context.Context, cmd ledger.DeductCommand) (domain.Receipt, error) {
	return domain.Receipt{SKU: cmd.SKU.String(), EventID: "0190b5a4-7a52-7c3e-9d1b-3f5e6a7b8c9d", Seq: 12345, Remaining: 999, Qty: cmd.Qty.Int64(), User: cmd.User.String(), RequestID: cmd.RequestID.String()}, nil
}

type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkDecodeDeduct measures decoding and validating one deduct body,
// the strict key check included.
//
//	go test -run '^$' -bench DecodeDeduct -benchmem ./internal/httpapi/
func BenchmarkDecodeDeduct(b *testing.B) {
	body := []byte(`{"user_id":"user-123","qty":1,"request_id":"0190b5a4-7a52-7c3e-9d1b-3f5e6a7b8c9d"}`)
	b.ReportAllocs()
	for b.Loop() {
		r := http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(body)), DefaultMaxBodyBytes)
		if _, err := decodeDeduct("sku-1", "", r); err != nil {
			b.Fatal(err)
		}
	}
}
