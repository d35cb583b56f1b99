package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CompareTargets lists what --compare can run, in the order it runs them.
func CompareTargets() []string { return slices.Clone(compareTargetList) }

// Run runs the bench that cfg describes, writes the report to out (a table,
// or JSON with cfg.JSON) and live progress to progress. It returns an error
// for an invalid cfg, a run that could not finish, and a run that oversold,
// failed attempts or left the ledger behind Redis; missed performance goals
// are reported, not failed.
//
// Zero fields of cfg take their defaults before it is validated.
func Run(ctx context.Context, cfg Config, deps Deps, out, progress io.Writer) error {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.Compare {
		rep, err := runCompare(ctx, cfg, deps, progress)
		if rep != nil {
			if werr := writeReport(cfg, out, rep, rep.print); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		return rep.failure()
	}
	rep, err := runSingle(ctx, cfg, deps, progress)
	if err != nil {
		return err
	}
	if err := writeReport(cfg, out, rep, rep.print); err != nil {
		return err
	}
	if f := rep.failures(); len(f) > 0 {
		return errors.New(strings.Join(f, "; "))
	}
	return nil
}

// writeReport writes rep to --json-out, if given, and to out as JSON or as
// render draws it.
func writeReport(cfg Config, out io.Writer, rep any, render func(io.Writer)) error {
	if cfg.JSONOut != "" {
		f, err := os.Create(cfg.JSONOut)
		if err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
		if err := writeJSON(f, rep); err != nil {
			f.Close()
			return fmt.Errorf("--json-out: %w", err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
	}
	if cfg.JSON {
		return writeJSON(out, rep)
	}
	render(out)
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// runSingle runs one target against the servers deps.Servers names (lib,
// pg-direct) or cfg.URL (http).
func runSingle(ctx context.Context, cfg Config, deps Deps, progress io.Writer) (*Report, error) {
	stock := cfg.Stock
	if stock == 0 {
		stock = 10_000
	}
	var srv Servers
	if cfg.Target != "http" {
		var err error
		if srv, err = deps.Servers(); err != nil {
			return nil, err
		}
		if err := cfg.checkLocal(srv); err != nil {
			return nil, err
		}
	}
	var t target
	switch cfg.Target {
	case "lib":
		site, err := srv.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer site.Close()
		lt := newLibTarget(ctx, site, deps.ErrorCode, cfg.Projector)
		lt.retire, lt.retireWait = cfg.Retire, cfg.CatchUp
		t = lt
	case "http":
		t = newHTTPTarget(cfg.URL, cfg.Token, cfg.OperatorToken, cfg.Concurrency, cfg.Timeout)
	case "pg-direct":
		pt, err := newPGTarget(ctx, srv.DatabaseURL, cfg.Concurrency, cfg.PGMaxConns)
		if err != nil {
			return nil, err
		}
		t = pt
	}
	defer t.close()
	fmt.Fprintf(progress, "bench %s: %d clients, %s, %d units on sale over %d SKUs, GOMAXPROCS %d\n",
		cfg.Target, cfg.Concurrency, cfg.limitText(), stock, cfg.SKUs, runtime.GOMAXPROCS(0))
	rep, err := runTarget(ctx, t, benchSKUs("bench", cfg.SKUs), cfg.spec(), stock, cfg.CatchUp, progress, &cpuSampler{selfOnly: true})
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

// benchSKU names a run's SKU uniquely: prefix, then the time in base 36.
func benchSKU(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// benchSKUs names a run's n SKUs: benchSKU(prefix) alone, or followed by
// -0, -1, ...
func benchSKUs(prefix string, n int) []string {
	base := benchSKU(prefix)
	if n == 1 {
		return []string{base}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = base + "-" + strconv.Itoa(i)
	}
	return out
}

// loadAverage reads the 1-minute load average, to show how busy the machine
// was besides the bench; "" where /proc is not there.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
