package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	errFakeSoldOut = errors.New("fake: sold out")
	errFakeAlready = errors.New("fake: already purchased")
)

// fakeLibrary sells one unit per buyer from memory, answering a resent
// request with its first receipt, as the library does.
type fakeLibrary struct {
	mu     sync.Mutex
	stock  map[string]int64
	seq    int64
	bought map[string]Receipt // by sku, user and request id
	buyers map[string]bool    // by sku and user
	// retired SKUs hold no bytes; the others 100 per unit sold.
	retired map[string]bool
}

var _ Library = (*fakeLibrary)(nil)

func newFakeLibrary() *fakeLibrary {
	return &fakeLibrary{stock: map[string]int64{}, bought: map[string]Receipt{}, buyers: map[string]bool{}, retired: map[string]bool{}}
}

func (f *fakeLibrary) PutOnSale(_ context.Context, sku string, stock int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stock[sku] = stock
	return nil
}

func (f *fakeLibrary) Deduct(_ context.Context, sku, user, requestID string) (Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rc, ok := f.bought[sku+"/"+user+"/"+requestID]; ok {
		rc.Replayed = true
		return rc, nil
	}
	switch {
	case f.buyers[sku+"/"+user]:
		return Receipt{}, errFakeAlready
	case f.stock[sku] == 0:
		return Receipt{}, errFakeSoldOut
	}
	f.stock[sku]--
	f.seq++
	rc := Receipt{Seq: f.seq, EventID: "e" + user}
	f.bought[sku+"/"+user+"/"+requestID], f.buyers[sku+"/"+user] = rc, true
	return rc, nil
}

func (f *fakeLibrary) RedisStock(_ context.Context, sku string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stock[sku], nil
}

func (f *fakeLibrary) WaitLedger(context.Context, string, time.Duration) (bool, time.Duration, error) {
	return true, 0, nil
}

func (f *fakeLibrary) Footprint(_ context.Context, sku string) (Footprint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.retired[sku] {
		return Footprint{UsedMemory: 1000, Tombstones: 20}, nil
	}
	var n int64
	for k := range f.buyers {
		if strings.HasPrefix(k, sku+"/") {
			n++
		}
	}
	return Footprint{UsedMemory: 1000 + 150*n, SKUHash: 100, Buyers: 40 * n, Requests: 60 * n}, nil
}

func (f *fakeLibrary) PurchaseBatches() (calls, attempts float64, err error) { return 0, 0, nil }

func (f *fakeLibrary) PurchaseCallsInFlight() (float64, bool, error) { return 2, true, nil }

func (f *fakeLibrary) Retire(_ context.Context, sku string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retired[sku] = true
	return nil
}

func fakeErrorCode(err error) string {
	switch {
	case errors.Is(err, errFakeSoldOut):
		return "sold_out"
	case errors.Is(err, errFakeAlready):
		return "already_purchased"
	}
	return "error"
}

// TestRunLib runs the lib target end to end over a fake library: the
// report counts every attempt once, sells exactly the stock, starts and
// stops the projector, and takes the outcome of errors from ErrorCode.
func TestRunLib(t *testing.T) {
	t.Parallel()
	var projecting, projected atomic.Bool
	deps := Deps{
		ErrorCode: fakeErrorCode,
		Servers: func() (Servers, error) {
			return Servers{RedisAddrs: []string{"127.0.0.1:6379"}, DatabaseURL: "postgres://bench@127.0.0.1/invledger",
				Open: func(context.Context) (*Site, error) {
					return &Site{Library: newFakeLibrary(), Close: func() {},
						Project: func(ctx context.Context) error {
							projecting.Store(true)
							<-ctx.Done()
							projected.Store(true)
							return nil
						}}, nil
				}}, nil
		},
	}
	cfg := Config{Target: "lib", Concurrency: 4, Requests: 300, Stock: 100, Users: 1000, RetryShare: 0.2, RepeatShare: 0.1,
		Projector: true, Retire: true, JSON: true}
	rep := runJSON(t, cfg, deps)
	var sum int64
	for _, n := range rep.Outcomes {
		sum += n
	}
	if rep.Attempts != 300 || sum != 300 || rep.Sold != 100 || rep.SoldByTarget != 100 || rep.Oversold != 0 || rep.Errors != 0 {
		t.Fatalf("report: %+v", rep)
	}
	if rep.Outcomes["sold_out"] == 0 || rep.Outcomes["replayed"] == 0 {
		t.Errorf("outcomes %v, want sold_out refusals and replayed retries", rep.Outcomes)
	}
	if rep.LedgerEqualsRedis == nil || !*rep.LedgerEqualsRedis {
		t.Errorf("ledger: %v", rep.LedgerEqualsRedis)
	}
	if !projecting.Load() || !projected.Load() {
		t.Errorf("projector started %v, stopped %v: want both", projecting.Load(), projected.Load())
	}
	m := rep.Memory
	if m == nil || m.UsedPerPurchase != 150 || m.KeysPerPurchase.Buyers != 40 || m.KeysPerPurchase.Requests != 60 ||
		m.KeysPerPurchase.Total != 101 || m.Retired == nil || m.Retired.KeysBytes != 0 || m.Retired.TombstoneBytes != 20 {
		t.Errorf("redis memory: %+v", m)
	}
}

// TestRunLibOverSKUs spreads a sale over several SKUs: every SKU is put on
// sale with its share of the stock, and the whole stock is sold.
func TestRunLibOverSKUs(t *testing.T) {
	t.Parallel()
	lib := newFakeLibrary()
	deps := Deps{
		ErrorCode: fakeErrorCode,
		Servers: func() (Servers, error) {
			return Servers{RedisAddrs: []string{"127.0.0.1:6379"}, DatabaseURL: "postgres://bench@127.0.0.1/invledger",
				Open: func(context.Context) (*Site, error) { return &Site{Library: lib, Close: func() {}}, nil }}, nil
		},
	}
	cfg := Config{Target: "lib", Concurrency: 4, Duration: 300 * time.Millisecond, Stock: 103, SKUs: 5, Users: 1000, RetryShare: 0.2, JSON: true}
	rep := runJSON(t, cfg, deps)
	if rep.SKUs != 5 || rep.Sold != 103 || rep.SoldByTarget != 103 || rep.Oversold != 0 || rep.Errors != 0 || rep.Outcomes["replayed"] == 0 {
		t.Fatalf("report: %+v", rep)
	}
	if rep.MeanCallsInFlight != 2 {
		t.Errorf("mean calls in flight %g, want the library's 2", rep.MeanCallsInFlight)
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if len(lib.stock) != 5 {
		t.Fatalf("%d SKUs put on sale, want 5", len(lib.stock))
	}
	for sku, left := range lib.stock {
		if left != 0 {
			t.Errorf("%s has %d units left", sku, left)
		}
	}
}

// runJSON runs cfg, which asks for --json, and reads its report.
func runJSON(t *testing.T, cfg Config, deps Deps) Report {
	t.Helper()
	var out bytes.Buffer
	if err := Run(context.Background(), cfg, deps, &out, io.Discard); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	return rep
}

// TestRunRefusesRemoteServers checks that lib refuses servers on other
// machines before it opens anything.
func TestRunRefusesRemoteServers(t *testing.T) {
	deps := Deps{Servers: func() (Servers, error) {
		return Servers{RedisAddrs: []string{"203.0.113.7:6379"}, DatabaseURL: "postgres://bench@203.0.113.8/invledger",
			Open: func(context.Context) (*Site, error) {
				t.Error("opened remote servers")
				return nil, errors.New("opened")
			}}, nil
	}}
	err := Run(context.Background(), Config{Target: "lib"}, deps, io.Discard, io.Discard)
	for _, w := range []string{"--redis-url 203.0.113.7:6379", "--database-url host 203.0.113.8", "--allow-remote"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("err = %v, want it to name %s", err, w)
		}
	}
}
