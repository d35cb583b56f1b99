package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/invledger/invledger/adapters/app"
	"github.com/invledger/invledger/adapters/cli/internal/devstack"
	"github.com/invledger/invledger/adapters/server"
	"github.com/invledger/invledger/adapters/testkit/benchkit"
	"github.com/invledger/invledger/adapters/testkit/localstack"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/internal/progress"
	"github.com/invledger/invledger/ledger"
)

// Config shapes the simulated flash sale.
type Config struct {
	Dir         string
	Stock       int64
	Buyers      int
	Concurrency int
	RetryShare  float64 // buyers who send their request twice (a retry)
	RepeatShare float64 // buyers who try again with a new request
	KeepData    bool
}

// Validate reports every invalid setting at once, naming the flag.
func (c Config) Validate() error {
	var errs []error
	if c.Stock < 1 || c.Stock > domain.MaxQuantity {
		errs = append(errs, fmt.Errorf("--stock must be 1-%d", domain.MaxQuantity))
	}
	if c.Buyers < 1 || c.Buyers > 1_000_000 {
		errs = append(errs, errors.New("--buyers must be 1-1000000"))
	}
	if c.Concurrency < 1 || c.Concurrency > 5000 {
		errs = append(errs, errors.New("--concurrency must be 1-5000"))
	}
	for name, v := range map[string]float64{"--retry-share": c.RetryShare, "--repeat-share": c.RepeatShare} {
		if v < 0 || v > 1 {
			errs = append(errs, fmt.Errorf("%s must be between 0 and 1", name))
		}
	}
	return errors.Join(errs...)
}

type demoTally struct {
	attempts, sold, replays, soldOut, already, failed atomic.Int64
	mu                                                sync.Mutex
	latencies                                         []time.Duration
	events                                            map[string]bool
}

// Run starts a private Redis and PostgreSQL, runs the projector and the sale,
// writes the live progress to progress and the summary to out, and fails if
// anything was oversold or the ledger did not catch up.
func Run(ctx context.Context, dc Config, out, progress io.Writer) error {
	dir := dc.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "invledger-demo-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	// Warnings only: the servers' start-up lines would break the progress line.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fmt.Fprintf(progress, "starting private redis-server and PostgreSQL in %s ...\n", dir)
	stack, err := localstack.StartStack(ctx, localstack.StackConfig{Dir: dir, Logger: log})
	if err != nil {
		return err
	}
	defer stack.Stop()
	if err := app.Migrate(ctx, stack.DatabaseURL, log); err != nil {
		return err
	}
	// The ledger is sealed with a key kept beside the servers' data, as dev
	// keeps its own.
	sealKeys, err := devstack.SealKeys(dir)
	if err != nil {
		return err
	}
	a, err := app.New(ctx, app.Config{RedisURL: stack.Redis.URL(), DatabaseURL: stack.DatabaseURL, SealKeys: sealKeys, Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()

	// The projector runs beside the sale, as serve would run it.
	projCtx, stopProjector := context.WithCancel(ctx)
	projDone := make(chan error, 1)
	go func() {
		projDone <- server.Serve(projCtx, a, server.Config{Components: []string{server.ComponentProjector}, DataDir: dir, Listen: "127.0.0.1:0"})
	}()
	defer func() {
		stopProjector()
		<-projDone
	}()

	sku := fmt.Sprintf("demo-%d", time.Now().Unix())
	if _, _, err := a.Service.CreateSKU(ctx, ledger.CreateSKUCommand{SKU: sku, Stock: dc.Stock, PerUserLimit: 1}); err != nil {
		return err
	}
	if _, err := a.Service.Warm(ctx, sku); err != nil {
		return err
	}

	attempts, err := demoAttempts(sku, dc)
	if err != nil {
		return err
	}
	tally := &demoTally{events: map[string]bool{}, latencies: make([]time.Duration, 0, len(attempts))}
	fmt.Fprintf(progress, "flash sale: %d units of %s, %d buyers, %d attempts, %d in flight\n", dc.Stock, sku, dc.Buyers, len(attempts), dc.Concurrency)
	start := time.Now()
	stopProgress := showProgress(progress, tally, len(attempts), dc.Stock, start)
	work := make(chan ledger.DeductCommand)
	var wg sync.WaitGroup
	for range dc.Concurrency {
		wg.Go(func() {
			for c := range work {
				t0 := time.Now()
				rc, err := a.Service.Deduct(ctx, c)
				tally.record(rc, err, time.Since(t0))
			}
		})
	}
feed:
	for _, c := range attempts {
		select {
		case work <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("demo interrupted: %w", err)
	}

	caughtUp, lag, err := benchkit.WaitLedgerEqualsRedis(ctx, a, sku, 60*time.Second)
	if err != nil {
		return err
	}
	return tally.summary(out, dc, len(attempts), elapsed, caughtUp, lag)
}

// demoAttempts builds the sale's traffic in a random order: one request per
// buyer, a duplicate of it for retrying buyers, and a second request for
// buyers who try again.
func demoAttempts(sku string, dc Config) ([]ledger.DeductCommand, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []ledger.DeductCommand
	for b := range dc.Buyers {
		user := fmt.Sprintf("buyer-%06d", b)
		first, err := ledger.NewDeductCommand(sku, user, 1, user+"-a")
		if err != nil {
			return nil, err
		}
		out = append(out, first)
		if rng.Float64() < dc.RetryShare {
			out = append(out, first)
		}
		if rng.Float64() < dc.RepeatShare {
			again, err := ledger.NewDeductCommand(sku, user, 1, user+"-b")
			if err != nil {
				return nil, err
			}
			out = append(out, again)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

func (t *demoTally) record(rc domain.Receipt, err error, took time.Duration) {
	t.attempts.Add(1)
	t.mu.Lock()
	t.latencies = append(t.latencies, took)
	replay := false
	if err == nil {
		replay = t.events[rc.EventID]
		t.events[rc.EventID] = true
	}
	t.mu.Unlock()
	switch {
	case err == nil && replay:
		t.replays.Add(1)
	case err == nil:
		t.sold.Add(1)
	case errors.Is(err, domain.ErrSoldOut):
		t.soldOut.Add(1)
	case errors.Is(err, domain.ErrAlreadyPurchased):
		t.already.Add(1)
	default:
		t.failed.Add(1)
	}
}

// showProgress redraws the sale's status line until the returned func is called.
func showProgress(w io.Writer, t *demoTally, total int, stock int64, start time.Time) (stop func()) {
	return progress.Line(w, 100*time.Millisecond, func() string {
		n := t.attempts.Load()
		rate := float64(n) / max(time.Since(start).Seconds(), 1e-9)
		return fmt.Sprintf("[%s] %6d/%d attempts  sold %d/%d  refused %d  %6.0f/s", progress.Bar(float64(n)/float64(total), 30),
			n, total, t.sold.Load(), stock, t.soldOut.Load()+t.already.Load(), rate)
	})
}

func (t *demoTally) summary(w io.Writer, dc Config, attempts int, elapsed time.Duration, caughtUp bool, lag time.Duration) error {
	slices.Sort(t.latencies)
	pct := func(p float64) time.Duration {
		if len(t.latencies) == 0 {
			return 0
		}
		return t.latencies[min(len(t.latencies)-1, int(p*float64(len(t.latencies))))]
	}
	oversold := max(0, t.sold.Load()-dc.Stock)
	fmt.Fprintf(w, "\nflash sale summary\n")
	fmt.Fprintf(w, "  units on sale          %d\n", dc.Stock)
	fmt.Fprintf(w, "  attempts               %d from %d buyers\n", attempts, dc.Buyers)
	fmt.Fprintf(w, "  sold                   %d\n", t.sold.Load())
	fmt.Fprintf(w, "  refused: sold_out      %d\n", t.soldOut.Load())
	fmt.Fprintf(w, "  refused: already_purchased %d\n", t.already.Load())
	fmt.Fprintf(w, "  retries answered with the original receipt %d\n", t.replays.Load())
	fmt.Fprintf(w, "  errors                 %d\n", t.failed.Load())
	fmt.Fprintf(w, "  oversold               %d\n", oversold)
	fmt.Fprintf(w, "  throughput             %.0f attempts/s over %s\n", float64(attempts)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  latency                p50 %s  p99 %s\n", pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	if caughtUp {
		fmt.Fprintf(w, "  ledger equals Redis    yes (%s after the last purchase)\n", lag.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "  ledger equals Redis    NO after %s\n", lag.Round(time.Second))
	}
	switch {
	case oversold > 0:
		return fmt.Errorf("oversold %d units", oversold)
	case t.failed.Load() > 0:
		return fmt.Errorf("%d purchase attempts failed with errors", t.failed.Load())
	case !caughtUp:
		return errors.New("the ledger did not catch up with Redis")
	}
	return nil
}
