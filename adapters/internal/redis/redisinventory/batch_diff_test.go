package redisinventory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/invledger/invledger/adapters/internal/redis/redisinventory"
	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/domain"
	"github.com/invledger/invledger/projections/streamentry"
)

// The differential test: a random run of attempts on a few SKUs of one
// partition (repeat buyers, request ids sent again with the same and with
// another body, quantities above the limit, SKUs selling out in the middle
// of a call, a close in the middle of the run, releases, holds and their
// ends) is sent to two Redis servers, once attempt by attempt and once with
// the consecutive purchase attempts gathered by the batcher into calls of
// several SKUs, several calls of a burst taken while the others are in
// flight, in the same order. Both must give the same answers, leave the
// same Redis state and append the same events. Event ids are the caller's,
// so both sides share them; only Redis's clock (stream ids, hold
// deadlines) and each server's own fence differ.

// diffOp is one call of the run.
type diffOp struct {
	kind    string // deduct, reserve, release, confirm, cancel, close
	sku     int
	user    string
	qty     int64
	req     string
	orderID string
	eventID string
}

// diffSKUs are the run's SKUs, all of one partition: stock and per-user
// limit. The first sells out within the run, in the middle of a call.
var diffSKUs = []struct{ stock, limit int64 }{{6, 2}, {60, 3}, {1_000, 1}}

// diffRun draws a run from seed: bursts of purchase attempts on the SKUs
// of the partition, which the batched side sends as one or more calls,
// between the calls that are never batched.
func diffRun(seed uint64, n int) []diffOp {
	rng := rand.New(rand.NewPCG(seed, 1))
	// sent are the attempts so far, for retries; sales the deductions and
	// confirmed holds, for releases; holds the reserves, for their ends.
	var ops, sent, sales, holds []diffOp
	eventID := func() string { return uuid.UUID(uuidFrom(rng)).String() }
	closeAt := n / 2
	for len(ops) < n {
		for range 1 + rng.IntN(24) {
			sku := rng.IntN(len(diffSKUs))
			op := diffOp{kind: "deduct", sku: sku, user: fmt.Sprint("u", rng.IntN(8)), qty: 1 + rng.Int64N(3),
				req: fmt.Sprint("r", len(ops)), eventID: eventID()}
			if rng.IntN(5) == 0 {
				op.kind = "reserve"
				if rng.IntN(2) == 0 {
					op.orderID = fmt.Sprint("o", rng.IntN(4))
				}
			}
			if len(sent) > 0 && rng.IntN(6) == 0 {
				// A request id sent again: a retry with the same body, or
				// a conflicting one (another user or quantity).
				// Half of them are of the last few, so some repeat an
				// attempt of the same batch.
				prev := sent[rng.IntN(len(sent))]
				if rng.IntN(2) == 0 {
					prev = sent[len(sent)-1-rng.IntN(min(len(sent), 4))]
				}
				op.kind, op.sku, op.req, op.orderID = prev.kind, prev.sku, prev.req, prev.orderID
				if rng.IntN(2) == 0 {
					op.user, op.qty = prev.user, prev.qty
				}
			}
			if rng.IntN(15) == 0 {
				op.qty = diffSKUs[op.sku].limit + 1
			}
			ops, sent = append(ops, op), append(sent, op)
			if op.kind == "reserve" {
				holds = append(holds, op)
			} else {
				sales = append(sales, op)
			}
		}
		switch r := rng.IntN(10); {
		case len(ops) >= closeAt && closeAt > 0:
			ops = append(ops, diffOp{kind: "close", sku: 1, eventID: eventID()})
			closeAt = 0
		case r < 3 && len(sales) > 0:
			p := sales[rng.IntN(len(sales))]
			ops = append(ops, diffOp{kind: "release", sku: p.sku, user: p.user, req: p.req, eventID: eventID()})
		case r < 6 && len(holds) > 0:
			h := holds[rng.IntN(len(holds))]
			kind := "confirm"
			if rng.IntN(2) == 0 {
				kind = "cancel"
			}
			ops = append(ops, diffOp{kind: kind, sku: h.sku, req: h.req, eventID: eventID()})
			if kind == "confirm" {
				// A confirmed hold's sale can be released like a deduction's.
				sales = append(sales, diffOp{kind: "deduct", sku: h.sku, user: h.user, req: h.req})
			}
		}
	}
	return ops
}

func uuidFrom(rng *rand.Rand) (u [16]byte) {
	for i := range u {
		u[i] = byte(rng.UintN(256))
	}
	u[6], u[8] = u[6]&0x0f|0x70, u[8]&0x3f|0x80
	return u
}

// diffSide is one Redis server and the inventory over it.
type diffSide struct {
	client   *redis.Client
	inv      *redisinventory.RedisInventory
	archiver *redisinventory.RedisArchiver
	keys     redisinventory.Keyspace
	skus     []domain.SKUID
}

func newDiffSide(t *testing.T, script string, entries streamentry.StreamEntries, layout redisinventory.SKULayout) *diffSide {
	t.Helper()
	srv := localstacktest.Redis(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	keys := must(redisinventory.NewKeyspace(redisinventory.DefaultPartitions)).WithLayout(layout)
	s := &diffSide{client: client, keys: keys, archiver: redisinventory.NewRedisArchiver(client, keys),
		inv: must(redisinventory.NewRedisInventory(client, keys, redisinventory.InventoryConfig{Timeout: 10 * time.Second, MaxBatch: diffMaxBatch,
			StreamEntries: entries}))}
	if script != "" {
		redisinventory.UseBatchScript(s.inv, script)
	}
	for i, d := range diffSKUs {
		id := must(domain.NewSKUID(diffSKUID(keys, i)))
		def := must(domain.NewSKUDefinition(id, d.stock, d.limit))
		warmID := uuid.NewSHA1(uuid.NameSpaceOID, []byte(id.String())).String()
		if _, stocked, err := s.inv.Warm(context.Background(), def, warmID); err != nil || !stocked {
			t.Fatalf("warm %s: %v %v", id, stocked, err)
		}
		s.skus = append(s.skus, id)
	}
	return s
}

// diffSKUID is the id of the run's i-th SKU: the i-th of diff-0, diff-1,
// ... in the partition of diff-0.
func diffSKUID(keys redisinventory.Keyspace, i int) string {
	p := keys.Partition("diff-0")
	for n := 0; ; n++ {
		if id := fmt.Sprint("diff-", n); keys.Partition(id) == p {
			if i == 0 {
				return id
			}
			i--
		}
	}
}

var diffTTL = must(domain.HoldConfig{MaxTTL: time.Hour, DefaultTTL: time.Hour}.NewHoldTTL(nil))

// call runs op and renders its answer with the clock's figures left out.
func (s *diffSide) call(ctx context.Context, op diffOp) string {
	sku := s.skus[op.sku]
	var req domain.RequestID
	if op.kind != "close" {
		req = must(domain.NewRequestID(op.req))
	}
	var v any
	var err error
	switch op.kind {
	case "deduct":
		v, err = s.inv.Deduct(ctx, sku, must(domain.NewUserID(op.user)), must(domain.NewQuantity(op.qty)), req, op.eventID)
	case "reserve":
		var h domain.Hold
		h, err = s.inv.Reserve(ctx, sku, must(domain.NewUserID(op.user)), must(domain.NewQuantity(op.qty)), req, diffTTL, op.orderID, op.eventID)
		h.ExpiresAt = time.Time{}
		v = h
	case "release":
		v, err = s.inv.Release(ctx, sku, must(domain.NewUserID(op.user)), req, must(domain.NewReason("differential")), op.eventID)
	case "confirm", "cancel":
		end := s.inv.ConfirmHold
		if op.kind == "cancel" {
			end = s.inv.CancelHold
		}
		var h domain.Hold
		h, err = end(ctx, sku, domain.HoldIDFor(sku, req), op.eventID)
		h.ExpiresAt = time.Time{}
		v = h
	case "close":
		_, _, err = s.archiver.CloseSKU(ctx, sku, op.eventID, "differential")
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%+v", v)
}

// oneByOne sends every op alone, in order.
func (s *diffSide) oneByOne(ctx context.Context, ops []diffOp) []string {
	answers := make([]string, len(ops))
	for i, op := range ops {
		answers[i] = s.call(ctx, op)
	}
	return answers
}

// diffShape is what a batched run exercised.
type diffShape struct {
	largest       int  // the most attempts of one burst
	calls         bool // a burst went in several calls, each taken while the others were in flight
	skus          bool // a burst held attempts of several SKUs
	soldOutWithin bool // a SKU sold out in the middle of a burst
}

// batched sends each burst of consecutive purchase attempts through the
// batcher: the attempts queue behind a partition whose call slots are all
// taken, one at a time so they arrive in the run's order, and are then
// sent, MaxBatch to a call.
func (s *diffSide) batched(t *testing.T, ctx context.Context, ops []diffOp) (answers []string, shape diffShape) {
	answers = make([]string, len(ops))
	for i := 0; i < len(ops); {
		j := i
		for j < len(ops) && (ops[j].kind == "deduct" || ops[j].kind == "reserve") {
			j++
		}
		if j == i {
			answers[i] = s.call(ctx, ops[i])
			i++
			continue
		}
		waiting, send := redisinventory.HoldBatches(s.inv, s.skus[ops[i].sku])
		var wg sync.WaitGroup
		for k := i; k < j; k++ {
			wg.Go(func() { answers[k] = s.call(ctx, ops[k]) })
			// The next attempt leaves only once this one queued, so the
			// calls hold them in the run's order.
			for deadline := time.Now().Add(10 * time.Second); waiting() != k-i+1; time.Sleep(20 * time.Microsecond) {
				if time.Now().After(deadline) {
					t.Fatalf("attempt %d did not queue within 10s", k)
				}
			}
		}
		send()
		wg.Wait()
		shape.largest = max(shape.largest, j-i)
		shape.calls = shape.calls || j-i > diffMaxBatch
		sold := map[int]bool{}
		for k := i; k < j; k++ {
			shape.skus = shape.skus || ops[k].sku != ops[i].sku
			sold[ops[k].sku] = sold[ops[k].sku] || strings.HasPrefix(answers[k], "{SKU:")
			shape.soldOutWithin = shape.soldOutWithin || sold[ops[k].sku] && answers[k] == "error: "+domain.ErrSoldOut.Error()
		}
		i = j
	}
	return answers, shape
}

// diffMaxBatch is the batched side's MaxBatch.
const diffMaxBatch = 8

// state renders every key of the server, with what differs between two
// servers by nature left out: the fence (each server's own run), hold
// deadlines and the expiry set's scores (Redis's clock), a close's time,
// and stream ids.
func (s *diffSide) state(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, key := range must(s.client.Keys(ctx, "*").Result()) {
		switch typ := must(s.client.Type(ctx, key).Result()); typ {
		case "hash":
			h := must(s.client.HGetAll(ctx, key).Result())
			delete(h, "fence")
			delete(h, "closed_at")
			for f, v := range h {
				if strings.HasPrefix(f, "hold:") {
					lines := strings.Split(v, "\n")
					lines[1] = "<expires>"
					h[f] = strings.Join(lines, "\n")
				}
			}
			out[key] = fmt.Sprint(h)
		case "zset":
			members := must(s.client.ZRange(ctx, key, 0, -1).Result())
			slices.Sort(members)
			out[key] = fmt.Sprint(members)
		case "stream":
			// A call's events are grouped by SKU, so only the order
			// within a SKU is the run's.
			for _, m := range must(s.client.XRange(ctx, key, "-", "+").Result()) {
				for _, e := range must(streamentry.ParseEvents(streamentry.MessageFields(m))) {
					e.StreamID, e.OccurredAt, e.ExpiresAt = "", time.Time{}, time.Time{}
					out[key+" of "+e.SKU] += fmt.Sprintf("%+v\n", e)
				}
			}
		default:
			out[key] = typ
		}
	}
	return out
}

// differences runs ops on both sides, their SKUs in layout, the batched one
// with script (batch.lua when empty) writing entries, and lists where they
// differ.
func differences(t *testing.T, ops []diffOp, script string, entries streamentry.StreamEntries, layout redisinventory.SKULayout) (
	diffs []string, shape diffShape, alone, together *diffSide) {
	ctx := context.Background()
	alone, together = newDiffSide(t, "", "", layout), newDiffSide(t, script, entries, layout)
	want := alone.oneByOne(ctx, ops)
	got, shape := together.batched(t, ctx, ops)
	for i := range ops {
		if got[i] != want[i] {
			diffs = append(diffs, fmt.Sprintf("op %d %+v: batched %s, one by one %s", i, ops[i], got[i], want[i]))
		}
	}
	ws, gs := alone.state(t, ctx), together.state(t, ctx)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range ws {
			if !yield(k) {
				return
			}
		}
		for k := range gs {
			if _, ok := ws[k]; !ok && !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if ws[k] != gs[k] {
			diffs = append(diffs, fmt.Sprintf("key %s: batched\n%s\none by one\n%s", k, gs[k], ws[k]))
		}
	}
	return diffs, shape, alone, together
}

// diffSeeds are the seeds of the differential test's runs.
var diffSeeds = []uint64{1, 2, 4}

func TestBatchedAttemptsAnswerAndWriteAsOneByOne(t *testing.T) {
	t.Parallel()
	for _, layout := range skuLayouts {
		for _, seed := range diffSeeds {
			t.Run(fmt.Sprint(layout, "/seed=", seed), func(t *testing.T) {
				t.Parallel()
				ops := diffRun(seed, 400)
				diffs, shape, _, _ := differences(t, ops, "", "", layout)
				if shape.largest < diffMaxBatch || !shape.calls || !shape.skus || !shape.soldOutWithin {
					t.Fatalf("the run does not exercise batching: %+v", shape)
				}
				for _, d := range diffs[:min(len(diffs), 3)] {
					t.Error(d[:min(len(d), 3000)])
				}
				if len(diffs) > 0 {
					t.Fatalf("%d differences between batched and one-by-one", len(diffs))
				}
			})
		}
	}
}

// TestTheDifferentialTestCatchesABrokenBatchScript runs the differential
// test, on SKUs of the default layout, against copies of batch.lua broken
// the ways a batch script can go wrong, each of which still answers like
// the real one for a batch of one.
func TestTheDifferentialTestCatchesABrokenBatchScript(t *testing.T) {
	t.Parallel()
	source := redisinventory.BatchScriptSource()
	for _, m := range []struct{ name, from, to string }{
		{"per-user limit checked once per SKU group",
			"elseif counted[user] + qty > limit then",
			"elseif tonumber(users[k] or '0') + qty > limit then"},
		{"stock read once per SKU group",
			"elseif stock < qty then",
			"elseif tonumber(live[1]) < qty then"},
		{"receipts read before the call's earlier writes",
			"local prior = receipts[request_id]",
			"local prior = requests[k]"},
	} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(source, m.from) {
				t.Fatalf("batch.lua no longer holds %q: update the mutation", m.from)
			}
			var diffs []string
			for _, seed := range diffSeeds {
				if diffs, _, _, _ = differences(t, diffRun(seed, 400), strings.Replace(source, m.from, m.to, 1), "", ""); len(diffs) > 0 {
					break
				}
			}
			if len(diffs) == 0 {
				t.Fatal("the differential test found no difference against the broken script")
			}
			t.Logf("%d differences, the first: %s", len(diffs), diffs[0])
		})
	}
}

// TestPerEventEntriesAreThoseOf100 runs the differential test with the
// batched side writing one entry per event: every entry it writes holds
// exactly the fields, in the same order, as the entry the one-by-one side
// wrote for the same event, which is the format of 1.0.0.
func TestPerEventEntriesAreThoseOf100(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	diffs, _, alone, together := differences(t, diffRun(diffSeeds[0], 400), "", streamentry.EntriesPerEvent, "")
	for _, d := range diffs[:min(len(diffs), 3)] {
		t.Error(d[:min(len(d), 3000)])
	}
	key := alone.keys.SKUStreamKey(alone.skus[0].String())
	// entries are the fields of each entry, by SKU.
	entries := func(s *diffSide) map[string][]string {
		out := map[string][]string{}
		for _, m := range must(s.client.Do(ctx, "XRANGE", key, "-", "+").Slice()) {
			fields := m.([]any)[1].([]any)
			for i := 0; i+1 < len(fields); i += 2 {
				if fields[i] == "expires_at" {
					fields[i+1] = "<Redis's clock>"
				}
			}
			sku := strings.Fields(fields[1].(string))[2]
			out[sku] = append(out[sku], fmt.Sprint(fields))
		}
		return out
	}
	want, got := entries(alone), entries(together)
	n := 0
	for sku := range want {
		n += len(want[sku])
		if !slices.Equal(got[sku], want[sku]) {
			t.Errorf("the entries of %s differ:\nbatched per event %v\none by one %v", sku, got[sku], want[sku])
		}
	}
	if n < 40 || len(got) != len(want) {
		t.Fatalf("%d entries one by one of %d skus, batched of %d skus", n, len(want), len(got))
	}
}
