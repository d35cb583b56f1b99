package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/internal/progress"
)

// loadSpec shapes the traffic of one run.
type loadSpec struct {
	Concurrency int
	Duration    time.Duration // stop issuing after this long
	Requests    int64         // stop issuing after this many attempts; 0: only Duration
	Users       int
	SKUs        int     // the sale's SKUs; each purchase picks one uniformly
	RetryShare  float64 // attempts that resend an earlier request (same request_id)
	RepeatShare float64 // attempts by an earlier buyer with a new request_id
	Timeout     time.Duration
	Drain       time.Duration // how long in-flight attempts may finish after issuing stops
}

// deductFunc runs one attempt for a worker. seq is the receipt's seq for a
// success (targets that answer outSold/outReplayed themselves return 0).
type deductFunc func(ctx context.Context, w *benchWorker, user, requestID string) (outcome, int64, error)

// benchWorker is one simulated client. scratch and conn are the target's:
// a buffer to reuse and a connection of this client's, closed at the end.
// sku is the index of the SKU the attempt being made buys.
type benchWorker struct {
	id      int
	sku     int
	rng     *rand.Rand
	recs    []benchRecord
	seqs    []int64
	errs    []string
	scratch []byte
	conn    io.Closer
}

// benchRecord is one finished attempt: when it ended and how long it took,
// in microseconds since the start of the run, and its outcome.
type benchRecord struct {
	done, latency uint32
	out           outcome
}

// traffic hands out attempts: mostly fresh buyers, some retries of a recent
// request and some second purchases by a recent buyer. Users wrap after
// Users distinct ones, so a long run also meets buyers who already bought.
type traffic struct {
	spec   loadSpec
	issued atomic.Int64
	base   atomic.Int64
}

// recentWindow is how far back retries and repeat buyers reach.
const recentWindow = 1000

// next hands out one attempt: its buyer, request id and the index of its
// SKU. The SKU is a function of the fresh purchase the attempt retries or
// repeats, so a retry goes to the SKU of the request it resends.
func (t *traffic) next(rng *rand.Rand, buf []byte) (user, requestID string, sku int, ok bool) {
	n := t.issued.Add(1)
	if t.spec.Requests > 0 && n > t.spec.Requests {
		return "", "", 0, false
	}
	b := t.base.Load()
	u := rng.Float64()
	switch {
	case b > 0 && u < t.spec.RetryShare:
		k := b - 1 - rng.Int64N(min(b, recentWindow))
		return t.userOf(k, buf), "b" + strconv.FormatInt(k, 10), t.skuOf(k), true
	case b > 0 && u < t.spec.RetryShare+t.spec.RepeatShare:
		k := b - 1 - rng.Int64N(min(b, recentWindow))
		return t.userOf(k, buf), "x" + strconv.FormatInt(n, 10), t.skuOf(k), true
	}
	k := t.base.Add(1) - 1
	return t.userOf(k, buf), "b" + strconv.FormatInt(k, 10), t.skuOf(k), true
}

// skuOf spreads the fresh purchases uniformly over the SKUs: a hash of the
// purchase's number (splitmix64's finalizer), not the number itself, so
// neighbouring purchases, which are in flight together, do not take turns.
func (t *traffic) skuOf(k int64) int {
	if t.spec.SKUs <= 1 {
		return 0
	}
	x := uint64(k)
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(t.spec.SKUs))
}

func (t *traffic) userOf(k int64, buf []byte) string {
	return string(strconv.AppendInt(append(buf[:0], 'u'), k%int64(t.spec.Users), 10))
}

// loadRun is what one closed-loop run measured.
type loadRun struct {
	start, stop time.Time // stop: when the last attempt ended
	recs        []benchRecord
	seqs        []int64
	errSamples  []string
}

// liveCounters feed the progress line. sold counts the successes a target
// itself tells from replays (outSold), for the units sold by a moment.
type liveCounters struct {
	done, ok, sold, soldOut, already, failed atomic.Int64
}

// runLoad drives deduct from spec.Concurrency workers until the duration or
// the request count is reached, then waits up to spec.Drain for attempts in
// flight; those still running are cancelled and counted as unfinished.
func runLoad(ctx context.Context, spec loadSpec, deduct deductFunc, live *liveCounters) (*loadRun, error) {
	tr := &traffic{spec: spec}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	start := time.Now()
	deadline := start.Add(spec.Duration)
	workers := make([]*benchWorker, spec.Concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &benchWorker{id: i, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano()))), scratch: make([]byte, 0, 256)}
		workers[i] = w
		wg.Go(func() {
			defer func() {
				if w.conn != nil {
					_ = w.conn.Close()
				}
			}()
			userBuf := make([]byte, 0, 24)
			for runCtx.Err() == nil && time.Now().Before(deadline) {
				user, req, sku, ok := tr.next(w.rng, userBuf)
				if !ok {
					return
				}
				w.sku = sku
				t0 := time.Now()
				actx, cancel := context.WithTimeout(runCtx, spec.Timeout)
				out, seq, err := deduct(actx, w, user, req)
				cancel()
				t1 := time.Now()
				if out == outError || out == outTimeout {
					switch {
					case runCtx.Err() != nil && ctx.Err() == nil:
						out = outUnfinished
					case errors.Is(err, context.DeadlineExceeded):
						out = outTimeout
					}
				}
				w.recs = append(w.recs, benchRecord{done: micros(t1.Sub(start)), latency: micros(t1.Sub(t0)), out: out})
				if out == outOK {
					w.seqs = append(w.seqs, seq)
				}
				if out.unexpected() && err != nil && len(w.errs) < 3 {
					w.errs = append(w.errs, fmt.Sprintf("%s: %v", out, err))
				}
				live.count(out)
			}
		})
	}
	// Stop issuing at the deadline; give attempts in flight spec.Drain.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		<-done
		return nil, fmt.Errorf("bench interrupted: %w", ctx.Err())
	case <-time.After(time.Until(deadline) + spec.Drain):
		cancelRun()
		<-done
	}
	run := &loadRun{start: start}
	for _, w := range workers {
		run.recs = append(run.recs, w.recs...)
		run.seqs = append(run.seqs, w.seqs...)
		for _, e := range w.errs {
			if len(run.errSamples) < 5 && !slices.Contains(run.errSamples, e) {
				run.errSamples = append(run.errSamples, e)
			}
		}
	}
	var last uint32
	for _, r := range run.recs {
		last = max(last, r.done)
	}
	run.stop = start.Add(time.Duration(last) * time.Microsecond)
	return run, ctx.Err()
}

func micros(d time.Duration) uint32 {
	if d < 0 {
		return 0
	}
	return uint32(min(d.Microseconds(), int64(^uint32(0))))
}

func (l *liveCounters) count(o outcome) {
	l.done.Add(1)
	switch {
	case o == outSold:
		l.ok.Add(1)
		l.sold.Add(1)
	case o.success():
		l.ok.Add(1)
	case o == outSoldOut:
		l.soldOut.Add(1)
	case o == outAlready:
		l.already.Add(1)
	case o.unexpected():
		l.failed.Add(1)
	}
}

// benchProgress redraws one status line (a line per second without a terminal)
// until the returned func is called.
func benchProgress(w io.Writer, label string, spec loadSpec, stock int64, live *liveCounters) (stop func()) {
	start := time.Now()
	return progress.Line(w, 200*time.Millisecond, func() string {
		el := time.Since(start)
		n := live.done.Load()
		var frac float64
		if spec.Duration > 0 {
			frac = el.Seconds() / spec.Duration.Seconds()
		}
		if spec.Requests > 0 {
			frac = max(frac, float64(n)/float64(spec.Requests))
		}
		return fmt.Sprintf("%-9s [%s] %5.1fs %8d attempts  ok %d (stock %d)  sold_out %d  already %d  errors %d  %6.0f/s",
			label, progress.Bar(frac, 20), el.Seconds(), n, live.ok.Load(), stock, live.soldOut.Load(), live.already.Load(),
			live.failed.Load(), float64(n)/max(el.Seconds(), 1e-9))
	})
}
