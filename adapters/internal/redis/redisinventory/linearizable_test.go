package redisinventory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
)

// The linearizability test: clients run deducts, retries of earlier
// request ids (same body, or another user's), releases and reads of a few
// SKUs of one partition through RedisInventory at once, and porcupine
// checks that the answers are those of some order of the calls that
// respects their real-time order, against a model of a SKU that knows
// nothing of batches. The differential test compares batched with
// one-by-one runs of one order; this one lets the batcher choose the order.

// linearStock and linearLimit make the SKUs sell out within the run, so
// the stock check is exercised, and releases give units back.
const (
	linearSKUs    = 3
	linearStock   = 8
	linearLimit   = 2
	linearUsers   = 8
	linearClients = 12
	linearOps     = 40 // per client
)

// linearConfig is the inventory under test: small batches, several calls
// of the partition in flight, so calls overlap and may run in any order.
func linearConfig() InventoryConfig {
	return InventoryConfig{Timeout: 10 * time.Second, MaxBatch: 8, BatchesInFlight: 4}
}

// The broken copy of the purchase script skips the stock check: it still
// answers like the real one until a SKU runs out. One substitution of the
// script's source, so it is re-pointed in one place when the script changes.
const (
	brokenStockCheckFrom = "elseif stock < qty then"
	brokenStockCheckTo   = "elseif false then"
)

// linearInput is one call: kind deduct, release or state.
type linearInput struct {
	kind string
	sku  int
	user string
	qty  int64
	req  string
}

// linearOutput is what the call answered. err is the refusal's name
// (sold_out, already, conflict, not_found), "" on success.
type linearOutput struct {
	err                string
	seq, remaining     int64
	replayed, released bool // deduct: a replay, and whether its units were released since
	already            bool // release: released before
	stock              int64
}

// linearReceipt is a deduction as the model keeps it, by request id.
type linearReceipt struct {
	user                string
	qty, seq, remaining int64
	released            bool
	releaseSeq          int64
}

// linearSKU is the model's state of one SKU. Step never changes a state in
// place: porcupine keeps the states it has seen.
type linearSKU struct {
	stock, seq int64
	counts     map[string]int64
	receipts   map[string]linearReceipt
}

func (s linearSKU) clone() linearSKU {
	s.counts, s.receipts = maps.Clone(s.counts), maps.Clone(s.receipts)
	return s
}

// step is the sequential specification: what one call on s answers and
// the state it leaves.
func (s linearSKU) step(in linearInput) (linearOutput, linearSKU) {
	switch in.kind {
	case "state":
		return linearOutput{stock: s.stock, seq: s.seq}, s
	case "release":
		rc, ok := s.receipts[in.req]
		switch {
		case !ok:
			return linearOutput{err: "not_found"}, s
		case rc.user != in.user:
			return linearOutput{err: "conflict"}, s
		case rc.released:
			return linearOutput{already: true, seq: rc.releaseSeq}, s
		}
		n := s.clone()
		n.seq++
		n.stock += rc.qty
		if n.counts[in.user] -= rc.qty; n.counts[in.user] <= 0 {
			delete(n.counts, in.user)
		}
		rc.released, rc.releaseSeq = true, n.seq
		n.receipts[in.req] = rc
		return linearOutput{seq: n.seq}, n
	}
	if rc, ok := s.receipts[in.req]; ok {
		if rc.user != in.user || rc.qty != in.qty {
			return linearOutput{err: "conflict"}, s
		}
		return linearOutput{replayed: true, released: rc.released, seq: rc.seq, remaining: rc.remaining}, s
	}
	switch {
	case s.counts[in.user]+in.qty > linearLimit:
		return linearOutput{err: "already"}, s
	case s.stock < in.qty:
		return linearOutput{err: "sold_out"}, s
	}
	n := s.clone()
	n.seq++
	n.stock -= in.qty
	n.counts[in.user] += in.qty
	n.receipts[in.req] = linearReceipt{user: in.user, qty: in.qty, seq: n.seq, remaining: n.stock}
	return linearOutput{seq: n.seq, remaining: n.stock}, n
}

// linearModel checks each SKU's history on its own: calls on different
// SKUs never affect each other. init is every SKU's state after warming.
func linearModel(init linearSKU) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := make([][]porcupine.Operation, linearSKUs)
			for _, op := range history {
				sku := op.Input.(linearInput).sku
				by[sku] = append(by[sku], op)
			}
			return by
		},
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			want, next := state.(linearSKU).step(input.(linearInput))
			return want == output.(linearOutput), next
		},
		Equal: func(a, b any) bool { return reflect.DeepEqual(a, b) },
		DescribeOperation: func(input, output any) string {
			return fmt.Sprintf("%+v -> %+v", input, output)
		},
	}
}

// linearRun runs the clients against a fresh Redis whose SKUs keep their
// records in layout, with the purchase script source (the real one when
// "") and returns the history, with the state every SKU starts from.
func linearRun(t *testing.T, source string, layout SKULayout) ([]porcupine.Operation, linearSKU) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: localstacktest.Redis(t).Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	keys, err := NewKeyspace(DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	keys = keys.WithLayout(layout)
	inv, err := NewRedisInventory(client, keys, linearConfig())
	if err != nil {
		t.Fatal(err)
	}
	if source != "" {
		UseBatchScript(inv, source)
	}
	ctx := context.Background()
	// SKUs of one partition, so a call that spans a partition's SKUs
	// carries several of them.
	var skus []domain.SKUID
	var init linearSKU
	for i := 0; len(skus) < linearSKUs; i++ {
		name := fmt.Sprint("lin-", i)
		if keys.Partition(name) != keys.Partition("lin-0") {
			continue
		}
		id, err := domain.NewSKUID(name)
		if err != nil {
			t.Fatal(err)
		}
		def, err := domain.NewSKUDefinition(id, linearStock, linearLimit)
		if err != nil {
			t.Fatal(err)
		}
		state, stocked, err := inv.Warm(ctx, def, uuid.NewString())
		if err != nil || !stocked {
			t.Fatalf("warm %s: stocked=%v err=%v", id, stocked, err)
		}
		init = linearSKU{stock: state.Stock, seq: state.Seq, counts: map[string]int64{}, receipts: map[string]linearReceipt{}}
		skus = append(skus, id)
	}

	// sent are the deducts issued so far, for retries and releases.
	var (
		mu      sync.Mutex
		sent    []linearInput
		history []porcupine.Operation
		failure error
	)
	start := time.Now()
	var wg sync.WaitGroup
	for c := range linearClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 31))
			for n := range linearOps {
				in := linearInput{kind: "deduct", sku: rng.IntN(linearSKUs), user: fmt.Sprint("u", rng.IntN(linearUsers)),
					qty: 1 + rng.Int64N(2), req: fmt.Sprintf("r%d-%d", c, n)}
				mu.Lock()
				switch u := rng.IntN(10); {
				case u < 2 && len(sent) > 0: // a retry, with the same body but now and then another user's
					prev := sent[rng.IntN(len(sent))]
					in.sku, in.req, in.qty = prev.sku, prev.req, prev.qty
					if rng.IntN(4) > 0 {
						in.user = prev.user
					}
				case u < 4 && len(sent) > 0: // a release, now and then of another user's deduction
					prev := sent[rng.IntN(len(sent))]
					in.kind, in.sku, in.req = "release", prev.sku, prev.req
					if rng.IntN(4) > 0 {
						in.user = prev.user
					}
				case u < 5:
					in.kind = "state"
				}
				if in.kind == "deduct" {
					sent = append(sent, in)
				}
				mu.Unlock()
				call := time.Since(start).Nanoseconds()
				out, err := linearCall(ctx, inv, skus[in.sku], in)
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				if err != nil && failure == nil {
					failure = fmt.Errorf("%+v: %w", in, err)
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	return history, init
}

// linearCall runs one call and reads its answer; err is anything besides
// the refusals the model knows.
func linearCall(ctx context.Context, inv *RedisInventory, sku domain.SKUID, in linearInput) (linearOutput, error) {
	user, err := domain.NewUserID(in.user)
	if err != nil {
		return linearOutput{}, err
	}
	req, err := domain.NewRequestID(in.req)
	if err != nil {
		return linearOutput{}, err
	}
	switch in.kind {
	case "state":
		st, err := inv.State(ctx, sku)
		return linearOutput{stock: st.Stock, seq: st.Seq}, err
	case "release":
		reason, err := domain.NewReason("linearizability test")
		if err != nil {
			return linearOutput{}, err
		}
		rr, err := inv.Release(ctx, sku, user, req, reason, uuid.NewString())
		if code := linearRefusal(err); code != "" {
			return linearOutput{err: code}, nil
		}
		return linearOutput{seq: rr.Seq, already: rr.AlreadyReleased}, err
	}
	qty, err := domain.NewQuantity(in.qty)
	if err != nil {
		return linearOutput{}, err
	}
	rc, err := inv.Deduct(ctx, sku, user, qty, req, uuid.NewString())
	if code := linearRefusal(err); code != "" {
		return linearOutput{err: code}, nil
	}
	return linearOutput{seq: rc.Seq, remaining: rc.Remaining, replayed: rc.Replayed, released: rc.Released}, err
}

func linearRefusal(err error) string {
	for code, sentinel := range map[string]error{"sold_out": domain.ErrSoldOut, "already": domain.ErrAlreadyPurchased,
		"conflict": domain.ErrConflict, "not_found": domain.ErrNotFound} {
		if errors.Is(err, sentinel) {
			return code
		}
	}
	return ""
}

// linearLayouts are the layouts the linearizability test runs on: a SKU's
// records are read and written by other calls in each (records.lua).
var linearLayouts = []SKULayout{LayoutOneHash, LayoutThreeHashes}

func TestPurchasesAreLinearizable(t *testing.T) {
	t.Parallel()
	for _, layout := range linearLayouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			history, init := linearRun(t, "", layout)
			refusals := map[string]int{}
			for _, op := range history {
				if o := op.Output.(linearOutput); o.err != "" {
					refusals[o.err]++
				} else if o.replayed || o.already {
					refusals["replayed"]++
				}
			}
			for _, want := range []string{"sold_out", "already", "conflict", "replayed"} {
				if refusals[want] == 0 {
					t.Errorf("the run had no %s answer (%v): it does not exercise the model", want, refusals)
				}
			}
			res, _ := porcupine.CheckOperationsVerbose(linearModel(init), history, 30*time.Second)
			if res != porcupine.Ok {
				t.Fatalf("the history of %d calls is %s against the model of a SKU", len(history), res)
			}
		})
	}
}

func TestTheLinearizabilityTestRefusesABrokenScript(t *testing.T) {
	t.Parallel()
	source := BatchScriptSource()
	if !strings.Contains(source, brokenStockCheckFrom) {
		t.Fatalf("the purchase script no longer holds %q: re-point brokenStockCheckFrom", brokenStockCheckFrom)
	}
	for _, layout := range linearLayouts {
		t.Run(string(layout), func(t *testing.T) {
			t.Parallel()
			history, init := linearRun(t, strings.Replace(source, brokenStockCheckFrom, brokenStockCheckTo, 1), layout)
			res, _ := porcupine.CheckOperationsVerbose(linearModel(init), history, 30*time.Second)
			if res != porcupine.Illegal {
				t.Fatalf("a script that skips the stock check gave a history porcupine calls %s, want Illegal", res)
			}
		})
	}
}
